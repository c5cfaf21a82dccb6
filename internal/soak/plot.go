package soak

import (
	"fmt"
	"image/color"
	"os"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
	"gonum.org/v1/plot/vg/vgimg"
)

// Plot writes a PNG of the run: write, read and Git write p99 latency
// over time above, the server's RSS and goroutines below.
func (rep *Report) Plot(path string) error {
	lat := plot.New()
	lat.Title.Text = "latency (p99 per interval)"
	lat.X.Label.Text = "seconds"
	lat.Y.Label.Text = "milliseconds"
	var writes, reads, git plotter.XYs
	for _, b := range rep.Buckets {
		if b.Writes.N > 0 {
			writes = append(writes, plotter.XY{X: b.At.Seconds(), Y: float64(b.Writes.P99.Microseconds()) / 1000})
		}
		if b.Reads.N > 0 {
			reads = append(reads, plotter.XY{X: b.At.Seconds(), Y: float64(b.Reads.P99.Microseconds()) / 1000})
		}
		if b.Git.N > 0 {
			git = append(git, plotter.XY{X: b.At.Seconds(), Y: float64(b.Git.P99.Microseconds()) / 1000})
		}
	}
	if err := addLine(lat, "writes", writes, color.RGBA{R: 200, A: 255}); err != nil {
		return err
	}
	if err := addLine(lat, "reads", reads, color.RGBA{B: 200, A: 255}); err != nil {
		return err
	}
	if err := addLine(lat, "git writes", git, color.RGBA{R: 230, G: 140, A: 255}); err != nil {
		return err
	}

	mem := plot.New()
	mem.Title.Text = "server"
	mem.X.Label.Text = "seconds"
	mem.Y.Label.Text = "RSS MiB / goroutines"
	var rss, gor plotter.XYs
	for _, s := range rep.Samples {
		rss = append(rss, plotter.XY{X: s.At.Seconds(), Y: s.RSS / (1 << 20)})
		gor = append(gor, plotter.XY{X: s.At.Seconds(), Y: s.Goroutines})
	}
	if err := addLine(mem, "RSS MiB", rss, color.RGBA{G: 140, A: 255}); err != nil {
		return err
	}
	if err := addLine(mem, "goroutines", gor, color.RGBA{R: 120, G: 120, B: 120, A: 255}); err != nil {
		return err
	}
	mem.Y.Min = 0

	img := vgimg.New(vg.Points(900), vg.Points(650))
	dc := draw.New(img)
	plots := [][]*plot.Plot{{lat}, {mem}}
	tiles := draw.Tiles{Rows: 2, Cols: 1, PadTop: vg.Points(8), PadBottom: vg.Points(8), PadLeft: vg.Points(8), PadRight: vg.Points(8), PadY: vg.Points(16)}
	canvases := plot.Align(plots, tiles, dc)
	for i := range plots {
		plots[i][0].Draw(canvases[i][0])
	}
	f, err := os.Create(path)
	if err != nil {
		return fmt.Errorf("plot: %w", err)
	}
	if _, err := (vgimg.PngCanvas{Canvas: img}).WriteTo(f); err != nil {
		f.Close()
		return fmt.Errorf("plot: %w", err)
	}
	return f.Close()
}

func addLine(p *plot.Plot, name string, xys plotter.XYs, c color.Color) error {
	if len(xys) == 0 {
		return nil
	}
	l, err := plotter.NewLine(xys)
	if err != nil {
		return fmt.Errorf("plot %s: %w", name, err)
	}
	l.Color = c
	l.Width = vg.Points(1.5)
	p.Add(l)
	p.Legend.Add(name, l)
	p.Legend.Top = true
	return nil
}
