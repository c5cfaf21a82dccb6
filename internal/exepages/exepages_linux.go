package exepages

import (
	"bufio"
	"bytes"
	"fmt"
	"os"
	"strconv"
	"strings"
	"syscall"
)

// Release drops this process's mappings of its executable's read-only
// segments (madvise MADV_DONTNEED). Only mappings that hold nothing but
// the file's own pages qualify: private, not writable, and without a page
// of their own (smaps' Anonymous is 0). A segment the dynamic loader
// relocated and then made read-only (RELRO, in a binary linked as PIE or
// by the external linker) has such pages, and so has code a debugger has
// put a breakpoint in; dropping them would bring back the file's
// unrelocated bytes, so they are left alone.
func Release() (Report, error) {
	exe, err := os.Readlink("/proc/self/exe")
	if err != nil {
		return Report{}, fmt.Errorf("find the executable: %w", err)
	}
	var st syscall.Stat_t
	if err := syscall.Stat("/proc/self/exe", &st); err != nil {
		return Report{}, fmt.Errorf("stat the executable: %w", err)
	}
	smaps, err := os.ReadFile("/proc/self/smaps")
	if err != nil {
		return Report{}, fmt.Errorf("read the process's mappings: %w", err)
	}
	segs, err := cleanReadOnlySegments(smaps, exe, st.Ino)
	if err != nil {
		return Report{}, err
	}
	r := Report{Segments: len(segs)}
	r.Before, _ = rssFile()
	for _, s := range segs {
		if _, _, errno := syscall.Syscall(syscall.SYS_MADVISE, s.start, s.end-s.start, syscall.MADV_DONTNEED); errno != 0 {
			return r, fmt.Errorf("release %s at %#x-%#x: %w", exe, s.start, s.end, errno)
		}
	}
	r.After, _ = rssFile()
	return r, nil
}

type segment struct{ start, end uintptr }

// cleanReadOnlySegments returns the private, read-only mappings of the
// file exe (inode ino) without pages of their own, from smaps, the text of
// /proc/self/smaps: for each mapping a line
//
//	start-end perms offset dev inode pathname
//
// followed by lines "Field: value", Anonymous among them.
func cleanReadOnlySegments(smaps []byte, exe string, ino uint64) ([]segment, error) {
	var (
		segs []segment
		cur  *segment // the mapping whose fields follow, if it qualifies
	)
	sc := bufio.NewScanner(bytes.NewReader(smaps))
	for sc.Scan() {
		line := sc.Text()
		f := strings.Fields(line)
		if len(f) == 0 {
			continue
		}
		if field, ok := strings.CutSuffix(f[0], ":"); ok && !strings.Contains(f[0], "-") {
			if field == "Anonymous" && cur != nil && (len(f) < 2 || f[1] != "0") {
				cur = nil // it has pages of its own
			}
			continue
		}
		// A mapping's line; the one before it is complete.
		if cur != nil {
			segs = append(segs, *cur)
			cur = nil
		}
		if len(f) < 6 {
			continue // anonymous
		}
		// The path is the rest of the line, spaces and all.
		_, path, _ := strings.Cut(line, " /")
		if "/"+path != exe || f[4] != strconv.FormatUint(ino, 10) {
			continue
		}
		if perms := f[1]; len(perms) != 4 || perms[0] != 'r' || perms[1] != '-' || perms[3] != 'p' {
			continue // writable or shared: its pages may differ from the file's
		}
		lo, hi, ok := strings.Cut(f[0], "-")
		start, err1 := strconv.ParseUint(lo, 16, 64)
		end, err2 := strconv.ParseUint(hi, 16, 64)
		if !ok || err1 != nil || err2 != nil || end <= start {
			return nil, fmt.Errorf("read the process's mappings: bad range %q", f[0])
		}
		cur = &segment{uintptr(start), uintptr(end)}
	}
	if cur != nil {
		segs = append(segs, *cur)
	}
	return segs, sc.Err()
}

// rssFile returns RssFile of /proc/self/status in bytes.
func rssFile() (int64, error) {
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return 0, err
	}
	for line := range strings.Lines(string(b)) {
		if v, ok := strings.CutPrefix(line, "RssFile:"); ok {
			kb, err := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 10, 64)
			return kb << 10, err
		}
	}
	return 0, fmt.Errorf("no RssFile in /proc/self/status")
}
