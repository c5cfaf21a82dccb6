// Command benchwatch is scripts/bench's watch fan-out row: it opens
// -watchers watches on a collection of a cairn server, updates one object
// of it -updates times in a row (through -write, another replica when
// given), and prints the delivery latency of the updates to every watcher,
// from just before each update was sent to the arrival of an event showing
// it (so a write's own latency is included): p50, p99 and max. A watcher
// that falls behind is sent the object as it is now (cairn reports an
// object's latest state, not every version in between), so an event can
// show several updates at once; each of them counts as seen then.
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
	"strings"
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
	flag.Parse()
	if *write == "" {
		*write = *url
	}
	if err := run(*url, *write, *path, *name, *watchers, *updates); err != nil {
		fmt.Fprintln(os.Stderr, "benchwatch:", err)
		os.Exit(1)
	}
}

func run(url, write, path, name string, watchers, updates int) error {
	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 4}}
	rv, err := listVersion(client, url+path)
	if err != nil {
		return err
	}
	sent := make([]atomic.Int64, updates) // unix nanoseconds, before each update
	var (
		mu        sync.Mutex
		latencies []time.Duration
		connected sync.WaitGroup
		done      = make(chan struct{})
		events    atomic.Int64
		finished  atomic.Int64
		wg        sync.WaitGroup
	)
	prefix := "bench " + strconv.FormatInt(time.Now().UnixNano(), 36) + " "
	for range watchers {
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
			own := make([]time.Duration, 0, updates)
			sc := bufio.NewScanner(resp.Body)
			sc.Buffer(make([]byte, 64<<10), 16<<20)
			for sc.Scan() {
				at := time.Now()
				var ev struct {
					Object struct {
						Spec struct {
							Description string `json:"description"`
						} `json:"spec"`
					} `json:"object"`
				}
				if json.Unmarshal(sc.Bytes(), &ev) != nil {
					continue
				}
				d, ok := strings.CutPrefix(ev.Object.Spec.Description, prefix)
				if !ok {
					continue
				}
				i, err := strconv.Atoi(d)
				if err != nil || i < len(own) || i >= updates {
					continue
				}
				events.Add(1)
				for j := len(own); j <= i; j++ {
					own = append(own, at.Sub(time.Unix(0, sent[j].Load())))
				}
				if len(own) == updates && finished.Add(1) == int64(watchers) {
					close(done)
				}
			}
			mu.Lock()
			latencies = append(latencies, own...)
			mu.Unlock()
		}()
	}
	connected.Wait()
	time.Sleep(500 * time.Millisecond) // let every watch reach the server
	start := time.Now()
	for i := range updates {
		body := fmt.Sprintf(`{"spec":{"description":%q}}`, prefix+strconv.Itoa(i))
		req, err := http.NewRequest(http.MethodPatch, write+path+"/"+name, bytes.NewReader([]byte(body)))
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
	if len(latencies) == 0 {
		return fmt.Errorf("no update reached a watcher")
	}
	slices.Sort(latencies)
	q := func(p float64) string {
		return fmt.Sprintf("%.1f", float64(latencies[int(p*float64(len(latencies)-1))].Microseconds())/1000)
	}
	fmt.Printf("p50 %s ms  p99 %s ms  max %s ms  seen %d of %d in %d events  (%d updates in %.1f s)\n",
		q(0.5), q(0.99), q(1), len(latencies), watchers*updates, events.Load(), updates, writing.Seconds())
	return nil
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
