package exepages

import (
	"slices"
	"strconv"
	"strings"
	"testing"
)

func TestCleanReadOnlySegments(t *testing.T) {
	const exe = "/opt/cairn dir/cairn"
	// mapping is a mapping's lines in /proc/self/smaps; anon is its
	// Anonymous field in kB.
	mapping := func(header string, anon int) string {
		return header + "\nSize: 4 kB\nRss: 4 kB\nAnonymous: " + strconv.Itoa(anon) + " kB\nVmFlags: rd mr mw me\n"
	}
	smaps := strings.Join([]string{
		mapping("00400000-02000000 r-xp 00000000 fd:01 4242 /opt/cairn dir/cairn", 0),
		mapping("02000000-03000000 r--p 01c00000 fd:01 4242 /opt/cairn dir/cairn", 0),
		// Relocated, then made read-only (RELRO): pages of its own.
		mapping("03000000-03001000 r--p 02c00000 fd:01 4242 /opt/cairn dir/cairn", 4),
		mapping("03001000-03100000 rw-p 02c01000 fd:01 4242 /opt/cairn dir/cairn", 0),
		mapping("03100000-03200000 rw-p 00000000 00:00 0 ", 8),
		mapping("7f0000000000-7f0000100000 r-xp 00000000 fd:01 77 /usr/lib/x86_64-linux-gnu/libc.so.6", 0),
		mapping("7f0000100000-7f0000200000 r--s 00000000 fd:01 4242 /opt/cairn dir/cairn", 0),
		mapping("7f0000200000-7f0000300000 r--p 00000000 fd:02 4243 /opt/cairn dir/cairn", 0),
		mapping("7ffc00000000-7ffc00021000 rw-p 00000000 00:00 0                          [stack]", 12),
	}, "")
	tests := []struct {
		name string
		exe  string
		ino  uint64
		want []segment
	}{
		{"code and read-only data, not the relocated part", exe, 4242, []segment{{0x400000, 0x2000000}, {0x2000000, 0x3000000}}},
		{"another inode under the same name", exe, 4243, []segment{{0x7f0000200000, 0x7f0000300000}}},
		{"not mapped", "/usr/bin/other", 4242, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := cleanReadOnlySegments([]byte(smaps), tt.exe, tt.ino)
			if err != nil {
				t.Fatal(err)
			}
			if !slices.Equal(got, tt.want) {
				t.Errorf("got %x, want %x", got, tt.want)
			}
		})
	}
	if _, err := cleanReadOnlySegments([]byte("0400000-zz r-xp 0 fd:01 4242 "+exe+"\n"), exe, 4242); err == nil || !strings.Contains(err.Error(), "bad range") {
		t.Errorf("a malformed range: got %v, want an error naming it", err)
	}
}

// TestRelease releases this test binary's own code while it runs: the
// resident file-backed memory drops, and the code runs on.
func TestRelease(t *testing.T) {
	r, err := Release()
	if err != nil {
		t.Fatal(err)
	}
	if r.Segments < 2 {
		t.Errorf("released %d segments, want the code and the read-only data", r.Segments)
	}
	if r.Before <= 0 || r.After >= r.Before {
		t.Errorf("resident file-backed memory %d before, %d after the release; want it to drop", r.Before, r.After)
	}
	// Code and data released above are mapped back on use.
	if got := strings.Repeat("ab", 3); got != "ababab" {
		t.Errorf("after the release: %q", got)
	}
	if _, err := rssFile(); err != nil {
		t.Error(err)
	}
}
