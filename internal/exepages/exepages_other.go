//go:build !linux

package exepages

// Release does nothing outside Linux.
func Release() (Report, error) { return Report{}, nil }
