// Package objectstore is sagebox's on-disk object store: the buckets and
// objects that the S3 API (package s3api) serves and that the rest of
// sagebox reads and writes directly (the training runner hard-links object
// files into job workspaces and uploads model.tar.gz through it).
//
// # Layout
//
// Everything lives under one directory, <data-dir>/s3:
//
//	index.db        SQLite (WAL): buckets, object metadata, multipart uploads
//	data/xx/<id>    object and part bytes, one immutable file per version
//	tmp/            files being written; emptied on Open
//	LOCK            flock held while the store is open (one process only)
//	clean-shutdown  present only between a clean Close and the next Open
//
// # Why an index instead of s3/<bucket>/<key> plus sidecars
//
// S3 keys are not file names. "a" and "a/b" are both valid keys (a path
// cannot be a file and a directory at once), a key may hold "..", "//", a
// trailing "/" or a 1024-byte segment longer than NAME_MAX, and listing must
// be in byte order with delimiter roll-up, which directory order does not
// give. So object bytes are stored under random ids that never derive from the
// key, which makes escaping the store impossible by construction, and the key
// lives only in the index, a SQLite table ordered by (bucket, key) as BLOBs
// (memcmp order = S3's UTF-8 byte order). Listing a page is then one range
// scan, and skipping a common prefix is one index seek, however many keys lie
// beneath it; no sidecar is ever read to list.
//
// # Durability and atomicity
//
// A write streams into tmp/, is fsynced, is renamed into data/ (and the
// directory fsynced), and only then is the index row committed in one
// transaction. A crash before the commit leaves at most an unreferenced file,
// which the next Open removes when the previous run did not shut down
// cleanly; readers never see a half-written object. Object files are never
// modified in place (and are created read-only, mode 0444): an overwrite
// commits a new file and unlinks the old one, so a hard link taken from
// FilePath, and an open Object, remain a consistent snapshot. Concurrent writers to one key each write their own
// file; the last commit wins.
package objectstore
