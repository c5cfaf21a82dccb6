// Command benchwatch is scripts/bench's watch fan-out row: it opens
// -watchers watches on a collection of a cairn server, updates one object
// of it -updates times in a row (through -write, another replica when
// given), and prints the delivery latency of the updates to every watcher:
// p50, p99 and max.
//
// Latency is measured on one clock, this process's: from just before an
// update is sent (its number is in the update, so an event names the
// update it shows) to the moment the event showing it was read from the
// watch stream. The write's own latency is thus included; the figures
// "after ack" measure from the write's acknowledgement instead (zero when
// an event arrived before the acknowledgement). A watcher that falls
// behind is sent the object as it is now (cairn reports an object's latest
// state, not every version in between), so an event can show several
// updates at once; each of them counts as seen then.
//
// It also checks what a watch promises: every watcher sees every update
// (in an event of its own or a later one), and in order (resourceVersions
// and update numbers only grow). A missed or reordered update is reported
// and makes it exit non-zero.
//
// Events are read without decoding the whole object (the update's number
// and the resourceVersion are found in the line), so the measuring
// process, which shares the machine with the servers, stays light.
//
//	benchwatch -url http://127.0.0.1:8080 -path /apis/flipt.io/v1alpha1/namespaces/default/flags -name f00001
package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"net/http"
	"os"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"time"
)

func main() {
	url := flag.String("url", "http://127.0.0.1:8080", "server the watchers watch")
	write := flag.String("write", "", "server the updates go through (default: -url)")
	path := flag.String("path", "/apis/flipt.io/v1alpha1/namespaces/default/flags", "collection to watch")
	name := flag.String("name", "f00001", "object of the collection to update")
	watchers := flag.Int("watchers", 100, "number of watches")
	updates := flag.Int("updates", 1000, "number of updates")
	pace := flag.Duration("pace", 0, "least time from one update's start to the next (0: each update right after the previous one's acknowledgement)")
	flag.Parse()
	if *write == "" {
		*write = *url
	}
	if err := run(*url, *write, *path, *name, *watchers, *updates, *pace); err != nil {
		fmt.Fprintln(os.Stderr, "benchwatch:", err)
		os.Exit(1)
	}
}

// watcher is what one watch saw.
type watcher struct {
	recv      []int64 // per update, unix nanoseconds when an event showed it
	events    int
	reordered int
}

func run(url, write, path, name string, watchers, updates int, pace time.Duration) error {
	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 4}}
	rv, err := listVersion(client, url+path)
	if err != nil {
		return err
	}
	sent := make([]atomic.Int64, updates)  // unix nanoseconds, before each update
	acked := make([]atomic.Int64, updates) // unix nanoseconds, at each acknowledgement
	var (
		connected sync.WaitGroup
		done      = make(chan struct{})
		finished  atomic.Int64
		wg        sync.WaitGroup
	)
	prefix := []byte("bench " + strconv.FormatInt(time.Now().UnixNano(), 36) + " ")
	ws := make([]*watcher, watchers)
	for k := range ws {
		w := &watcher{recv: make([]int64, 0, updates)}
		ws[k] = w
		connected.Add(1)
		wg.Add(1)
		go func() {
			defer wg.Done()
			resp, err := client.Get(url + path + "?watch=true&resourceVersion=" + rv)
			connected.Done()
			if err != nil {
				fmt.Fprintln(os.Stderr, "benchwatch: watch:", err)
				return
			}
			defer resp.Body.Close()
			go func() { <-done; resp.Body.Close() }()
			var lastRV int64
			sc := bufio.NewScanner(resp.Body)
			sc.Buffer(make([]byte, 64<<10), 16<<20)
			for sc.Scan() {
				at := time.Now().UnixNano()
				line := sc.Bytes()
				i, ok := updateOf(line, prefix)
				if !ok || i >= updates {
					continue
				}
				w.events++
				if v := resourceVersionOf(line); v <= lastRV {
					w.reordered++
				} else {
					lastRV = v
				}
				if i < len(w.recv) {
					w.reordered++ // an older update after a newer one
					continue
				}
				for len(w.recv) <= i {
					w.recv = append(w.recv, at)
				}
				if len(w.recv) == updates && finished.Add(1) == int64(watchers) {
					close(done)
				}
			}
		}()
	}
	connected.Wait()
	time.Sleep(500 * time.Millisecond) // let every watch reach the server
	start := time.Now()
	var body bytes.Buffer
	for i := range updates {
		if pace > 0 {
			time.Sleep(time.Until(start.Add(time.Duration(i) * pace)))
		}
		body.Reset()
		fmt.Fprintf(&body, `{"spec":{"description":%q}}`, string(prefix)+strconv.Itoa(i))
		req, err := http.NewRequest(http.MethodPatch, write+path+"/"+name, bytes.NewReader(body.Bytes()))
		if err != nil {
			return err
		}
		req.Header.Set("Content-Type", "application/merge-patch+json")
		sent[i].Store(time.Now().UnixNano())
		resp, err := client.Do(req)
		if err != nil {
			return fmt.Errorf("update %d: %w", i, err)
		}
		msg, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		acked[i].Store(time.Now().UnixNano())
		if resp.StatusCode != http.StatusOK {
			return fmt.Errorf("update %d: %s: %s", i, resp.Status, msg)
		}
	}
	writing := time.Since(start)
	select {
	case <-done:
	case <-time.After(10 * time.Second):
	}
	select {
	case <-done:
	default:
		close(done)
	}
	wg.Wait()

	var fromSend, fromAck, writes, spread []time.Duration
	seen, events, reordered := 0, 0, 0
	first := make([]int64, updates)
	last := make([]int64, updates)
	for _, w := range ws {
		seen += len(w.recv)
		events += w.events
		reordered += w.reordered
		for i, at := range w.recv {
			fromSend = append(fromSend, time.Duration(at-sent[i].Load()))
			fromAck = append(fromAck, max(0, time.Duration(at-acked[i].Load())))
			if first[i] == 0 || at < first[i] {
				first[i] = at
			}
			last[i] = max(last[i], at)
		}
	}
	if seen == 0 {
		return fmt.Errorf("no update reached a watcher")
	}
	for i := range updates {
		writes = append(writes, time.Duration(acked[i].Load()-sent[i].Load()))
		if first[i] != 0 {
			spread = append(spread, time.Duration(last[i]-first[i]))
		}
	}
	// scripts/bench reads the figure after the token "p99": the others
	// are written p50/p99.
	fmt.Printf("p50 %s ms  p99 %s ms  max %s ms  seen %d of %d in %d events  (%d updates in %.1f s)  after ack p50/p99 %s/%s ms  write p50/p99 %s/%s ms  first to last watcher p50/p99 %s/%s ms\n",
		quantile(fromSend, 0.5), quantile(fromSend, 0.99), quantile(fromSend, 1), seen, watchers*updates, events, updates, writing.Seconds(),
		quantile(fromAck, 0.5), quantile(fromAck, 0.99), quantile(writes, 0.5), quantile(writes, 0.99),
		quantile(spread, 0.5), quantile(spread, 0.99))
	if seen != watchers*updates || reordered > 0 {
		return fmt.Errorf("%d of %d updates missed, %d events out of order", watchers*updates-seen, watchers*updates, reordered)
	}
	return nil
}

func quantile(ds []time.Duration, p float64) string {
	if len(ds) == 0 {
		return "-"
	}
	slices.Sort(ds)
	return fmt.Sprintf("%.1f", float64(ds[int(p*float64(len(ds)-1))].Microseconds())/1000)
}

// updateOf finds the number of the update an event line shows, written
// after prefix in the object's description.
func updateOf(line, prefix []byte) (int, bool) {
	at := bytes.Index(line, prefix)
	if at < 0 {
		return 0, false
	}
	rest := line[at+len(prefix):]
	n := 0
	for n < len(rest) && rest[n] >= '0' && rest[n] <= '9' {
		n++
	}
	i, err := strconv.Atoi(string(rest[:n]))
	return i, err == nil
}

// resourceVersionOf reads the object's resourceVersion from an event line
// (the first one in it: the object's metadata comes before its spec).
func resourceVersionOf(line []byte) int64 {
	const key = `"resourceVersion":"`
	at := bytes.Index(line, []byte(key))
	if at < 0 {
		return 0
	}
	rest := line[at+len(key):]
	end := bytes.IndexByte(rest, '"')
	if end < 0 {
		return 0
	}
	v, _ := strconv.ParseInt(string(rest[:end]), 10, 64)
	return v
}

// listVersion returns the collection's resourceVersion, where the watches
// start.
func listVersion(client *http.Client, url string) (string, error) {
	resp, err := client.Get(url + "?limit=1")
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	var list struct {
		Metadata struct {
			ResourceVersion string `json:"resourceVersion"`
		} `json:"metadata"`
	}
	if resp.StatusCode != http.StatusOK {
		return "", fmt.Errorf("list %s: %s", url, resp.Status)
	}
	if err := json.NewDecoder(resp.Body).Decode(&list); err != nil {
		return "", fmt.Errorf("list %s: %w", url, err)
	}
	return list.Metadata.ResourceVersion, nil
}
