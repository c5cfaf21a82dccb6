// Package exepages gives back the pages of cairn's own executable that only
// start-up needed.
//
// Every Go package linked into a program runs its initialisation when the
// program starts, and cairn's start-up (migrations, schemas, routes, the
// read cache) runs code from much of the rest. The kernel maps pages of an
// executable around each one touched (fault-around), so by the time cairn
// serves, most of its code and read-only data is resident in the process
// although little of it runs again. Release drops those mappings; the pages
// stay in the page cache, and any that are needed again are mapped back on
// first use, as they were at start-up.
package exepages

// Report says what Release did.
type Report struct {
	// Segments is how many read-only mappings of the executable were
	// released (its code and its read-only data).
	Segments int
	// Before and After are the process's resident file-backed memory
	// (RssFile in /proc/self/status), in bytes, around the release.
	Before, After int64
}
