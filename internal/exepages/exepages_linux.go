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
// segments (madvise MADV_DONTNEED). Only mappings that are never written
// qualify: a private read-only file mapping holds nothing but copies of the
// file's pages, so dropping it loses nothing. (A debugger's breakpoints are
// private copies of code pages and would be lost; cairn calls Release once,
// when it has started.)
func Release() (Report, error) {
	exe, err := os.Readlink("/proc/self/exe")
	if err != nil {
		return Report{}, fmt.Errorf("find the executable: %w", err)
	}
	var st syscall.Stat_t
	if err := syscall.Stat("/proc/self/exe", &st); err != nil {
		return Report{}, fmt.Errorf("stat the executable: %w", err)
	}
	maps, err := os.ReadFile("/proc/self/maps")
	if err != nil {
		return Report{}, fmt.Errorf("read the process's mappings: %w", err)
	}
	segs, err := readOnlySegments(maps, exe, st.Ino)
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

// readOnlySegments returns the private, read-only mappings of the file exe
// (inode ino) in maps, the text of /proc/self/maps:
//
//	start-end perms offset dev inode pathname
func readOnlySegments(maps []byte, exe string, ino uint64) ([]segment, error) {
	var segs []segment
	sc := bufio.NewScanner(bytes.NewReader(maps))
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) < 6 {
			continue // an anonymous mapping
		}
		// The path is the rest of the line, spaces and all.
		_, path, _ := strings.Cut(sc.Text(), " /")
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
		segs = append(segs, segment{uintptr(start), uintptr(end)})
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
