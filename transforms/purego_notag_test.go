//go:build !purego

package transforms

// puregoTag: this test binary was built without the purego tag.
const puregoTag = false
