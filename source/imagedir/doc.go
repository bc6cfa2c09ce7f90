// Package imagedir reads image datasets laid out as torchvision's ImageFolder expects
// (--from folder) or listed in a file (--from list), and decodes their images with
// transforms.DecodeFile.
//
// # Folder
//
// Every non-hidden subfolder of the root is a class; labels are class indexes in sorted
// name order. A class's images are found recursively, in torchvision's order: its folders
// sorted by path (as sorted(os.walk(...)) sorts them), then the files of each sorted by name.
// Only files with one of Extensions (case-insensitive, torchvision's IMG_EXTENSIONS) are
// images; others are ignored, as ImageFolder ignores them.
//
// Differences from torchvision, deliberate and recorded in the manifest's source spec:
//   - Hidden files and folders (names starting with ".") are ignored. torchvision includes
//     them, so ".ipynb_checkpoints" becomes a class and macOS "._x.jpg" files fail to decode.
//   - A root without class folders, or a class folder without images, is refused when the
//     source is opened (torchvision raises "Found no valid file for the classes ..."); nothing
//     is packed.
//   - Symbolic links to files and folders are followed, as torchvision follows them, but a
//     folder that links back to one of its own ancestors is not entered again (os.walk with
//     followlinks=True would loop). A folder reached twice by two paths (a class folder
//     linking to another class folder, a subfolder linking to a folder found elsewhere in the
//     tree) is refused when the source is opened, naming both paths: torchvision would list
//     its images twice, under two labels. So is an image that is a symbolic link to an image
//     of another class of the tree, or two links in two classes to one file (one image under
//     two labels); a link to an image of its own class is packed. Only links are resolved, at
//     open; hard links are not looked through.
//
// Every entry with an image extension that is not a folder is an input, as ImageFolder lists
// it: a symbolic link to an image is packed like the image; a dangling symlink, a symlink loop,
// a FIFO, a device or a socket is listed in the manifest's skipped with its reason ("dangling
// symlink", "symlink loop", "not a regular file: FIFO"), and is never opened (see
// source/internal/fsentry). So every enumerated input is packed or skipped with a reason.
//
// # Names
//
// Class names and item names (the skipped list's inputs) are escaped with fsentry.Name: valid
// UTF-8 is kept, a byte that is not valid UTF-8 is written \xHH and a backslash \\, so names that
// differ only in such bytes stay distinct. Two classes with the same name are refused.
//
// # Per-record metadata
//
// Every record carries {"path": NAME} as per-record metadata: its item name, the path relative
// to the folder ("cat/001.jpg") or the path as written in the list, escaped the same way. It
// is shown by packer inspect --records and preview's captions and returned by
// shard.Reader.RecordMeta and packer_reader's ds.meta(i). It depends on the name only, so the
// bytes stay the same for any number of workers and for a build in parts merged.
//
// # List
//
// A CSV file with a header (columns "path" and "label") or JSON Lines; see OpenList. A list
// naming one file twice (paths equal once resolved against the list's folder and cleaned) is
// refused, naming both lines: it would be packed twice.
//
// # Errors
//
// OpenFolder and OpenList fail on unusable datasets (ErrNoClasses, ErrEmptyClass, a
// FormatError naming the list line). Decode returns a *source.InputError for a bad image,
// naming it by its relative path and wrapping the transforms error kind, so the build skips
// it or fails as --on-error says.
//
// # Concurrency
//
// Info and Enumerate are called from one goroutine; Decode is safe for concurrent use.
package imagedir
