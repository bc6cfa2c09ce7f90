package pipeline

import (
	"errors"
	"fmt"
)

// ErrInputsUnaccounted is wrapped by the error of a build whose inputs do not add up: every
// enumerated input must come back from the workers and be packed (yield at least one record)
// or listed in the manifest's skipped. It is an internal error: the build fails and nothing is
// committed.
var ErrInputsUnaccounted = errors.New("internal error: inputs not accounted for")

// ErrNoRecords is wrapped by the skip reason of an input that decoded without an error but
// yielded no record: it is listed rather than dropped without a word.
var ErrNoRecords = errors.New("no records")

// noRecords is the reason an input that yielded nothing is skipped.
func noRecords() error {
	return fmt.Errorf("%w: it decoded without an error but yielded no record", ErrNoRecords)
}

// checkInputs checks the build's invariant before it commits: every input the source
// enumerated came back from the workers (done), and each was packed or skipped exactly once.
func checkInputs(enumerated, done, packed, skipped int64) error {
	if enumerated != done || packed+skipped != enumerated {
		return fmt.Errorf("%w: %d enumerated, %d decoded, %d packed + %d skipped (please report this bug)",
			ErrInputsUnaccounted, enumerated, done, packed, skipped)
	}
	return nil
}
