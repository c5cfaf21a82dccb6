package stack

import (
	"context"
	"fmt"
	"sync"
	"testing"
)

// TestRenderConcurrently: the controller renders several installations at
// once; run under -race.
func TestRenderConcurrently(t *testing.T) {
	s := mustLoad(t, minimalGCP)
	w := mustLoad(t, writeTree(t, webStack()))
	var wg sync.WaitGroup
	errs := make(chan error, 8)
	for i := range 8 {
		wg.Go(func() {
			name := fmt.Sprintf("env%d", i)
			var err error
			if i%2 == 0 {
				_, err = Renderer{}.Render(context.Background(), s, s.NewInstallation("default", name, "", nil, map[string]any{"region": "us-west1", "projectID": "bars-project"}))
			} else {
				_, err = Renderer{}.Render(context.Background(), w, w.NewInstallation("default", name, "", nil, map[string]any{"image": "x"}))
			}
			errs <- err
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Error(err)
		}
	}
}
