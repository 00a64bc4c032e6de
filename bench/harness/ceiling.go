package harness

import (
	"context"
	"crypto/sha256"
	"encoding/binary"
	"fmt"
	"io"
	"math"
	"math/rand/v2"
	"net"
	"os"
	"path/filepath"
	"runtime"
	"time"
)

// Ceiling is what this machine allows a cold, verified and cached download
// on loopback, measured in the same run as the scenarios. Every field is
// one sample per repetition.
type Ceiling struct {
	// Bytes is how much each probe moved.
	Bytes int64
	// Disk is a sequential write of Bytes into the cache's filesystem, in
	// 1 MiB writes, with one fsync at the end, in MiB/s; DiskCPU is the CPU
	// it took, in core-seconds per GiB (the copy into the page cache; the
	// kernel's writeback threads are not counted).
	Disk, DiskCPU []float64
	// SHA is sha256 over Bytes on one goroutine (one core), in MiB/s.
	SHA []float64
	// TCP is one loopback connection, a Go server writing to a Go client,
	// in MiB/s; TCPCPU is the CPU both ends took, core-seconds per GiB.
	TCP, TCPCPU []float64
	// Cores is the number of CPUs the whole pipeline shares.
	Cores int
	// Line is the upstream's cap for a client that opens LineConns
	// connections (bandwidth × LineConns), in MiB/s; 0 means uncapped.
	Line      float64
	LineConns int
}

// ceilingParts are the medians the ceiling is computed from.
type ceilingParts struct {
	disk, sha, tcp, line float64 // MiB/s; line 0 = none
	// cpu is the CPU budget: Cores divided by the CPU seconds one MiB costs
	// on its way through the pipeline.
	cpu float64
	// ceiling is the smallest of them; limit names which.
	ceiling float64
	limit   string
}

// parts computes the ceiling: the slowest of the pipeline's stages. Every
// byte of a cold download through hubproxy crosses loopback twice (CDN →
// hubproxy, hubproxy → client), is written to the cache's filesystem once
// and hashed once (sha256, one stream, so one core). Each stage alone caps
// the download at its own throughput; together they share the machine's
// cores, which caps it at Cores ÷ (2·TCP CPU + sha256 CPU + write CPU) per
// byte. The ceiling is the smallest of disk, sha256, loopback, that CPU
// budget, and the upstream's line rate at the connections used.
func (c *Ceiling) parts() ceilingParts {
	med := func(xs []float64) float64 {
		if s := summarize(xs); s.n > 0 {
			return s.median
		}
		return math.NaN()
	}
	p := ceilingParts{disk: med(c.Disk), sha: med(c.SHA), tcp: med(c.TCP), line: c.Line}
	perGiB := 2*med(c.TCPCPU) + 1024/p.sha + med(c.DiskCPU) // core-seconds per GiB
	p.cpu = float64(c.Cores) / perGiB * 1024
	p.ceiling, p.limit = math.Inf(1), ""
	for _, s := range []struct {
		name string
		v    float64
	}{{"disk write", p.disk}, {"sha256", p.sha}, {"loopback TCP", p.tcp}, {"CPU budget", p.cpu}, {"upstream line rate", p.line}} {
		if s.v > 0 && s.v < p.ceiling {
			p.ceiling, p.limit = s.v, s.name
		}
	}
	if math.IsInf(p.ceiling, 1) {
		p.ceiling = math.NaN()
	}
	return p
}

// measureCeiling runs the three probes reps times, taking turns, in dir
// (the filesystem the caches live on).
func measureCeiling(ctx context.Context, dir string, size int64, reps int, log func(string, ...any)) (*Ceiling, error) {
	buf := make([]byte, min(size, 64*MiB))
	var seed [32]byte
	binary.LittleEndian.PutUint64(seed[:], 42)
	_, _ = rand.NewChaCha8(seed).Read(buf) // never fails; incompressible
	c := &Ceiling{Bytes: size, Cores: runtime.NumCPU()}
	for range reps {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		rate, cpu, err := diskWrite(filepath.Join(dir, "ceiling-disk"), buf, size)
		if err != nil {
			return nil, fmt.Errorf("ceiling: disk write: %w", err)
		}
		c.Disk, c.DiskCPU = append(c.Disk, rate), append(c.DiskCPU, cpu)
		sha := shaRate(buf, size)
		c.SHA = append(c.SHA, sha)
		rate, cpu, err = loopbackTCP(ctx, buf, size)
		if err != nil {
			return nil, fmt.Errorf("ceiling: loopback TCP: %w", err)
		}
		c.TCP, c.TCPCPU = append(c.TCP, rate), append(c.TCPCPU, cpu)
		log("0 ceiling        disk %6.0f MiB/s (%.2f core-s/GiB)  sha256 %6.0f MiB/s  loopback %6.0f MiB/s (%.2f core-s/GiB)",
			c.Disk[len(c.Disk)-1], c.DiskCPU[len(c.DiskCPU)-1], sha, rate, cpu)
	}
	return c, nil
}

// perGiB turns CPU time spent moving n bytes into core-seconds per GiB.
func perGiB(cpu time.Duration, n int64) float64 {
	return cpu.Seconds() / (float64(n) / float64(GiB))
}

// diskWrite writes size bytes (buf, repeated) to a new file at path in
// 1 MiB writes, fsyncs it and removes it. It returns MiB/s over the writes
// and the fsync, and the CPU this process spent, per GiB.
func diskWrite(path string, buf []byte, size int64) (rate, cpu float64, err error) {
	f, err := os.OpenFile(path, os.O_CREATE|os.O_TRUNC|os.O_WRONLY, 0o644)
	if err != nil {
		return 0, 0, err
	}
	defer os.Remove(path)
	defer f.Close()
	cpu0, t0 := selfCPU(), time.Now()
	for done := int64(0); done < size; {
		off := done % int64(len(buf))
		n := min(MiB, size-done, int64(len(buf))-off)
		if _, err := f.Write(buf[off : off+n]); err != nil {
			return 0, 0, err
		}
		done += n
	}
	if err := f.Sync(); err != nil {
		return 0, 0, err
	}
	d := time.Since(t0)
	return mibps(size, d), perGiB(selfCPU()-cpu0, size), nil
}

// shaRate hashes size bytes (buf, repeated) with sha256 on this goroutine,
// in 1 MiB writes, and returns MiB/s.
func shaRate(buf []byte, size int64) float64 {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	h := sha256.New()
	t0 := time.Now()
	for done := int64(0); done < size; {
		off := done % int64(len(buf))
		n := min(MiB, size-done, int64(len(buf))-off)
		h.Write(buf[off : off+n])
		done += n
	}
	_ = h.Sum(nil)
	return mibps(size, time.Since(t0))
}

// loopbackTCP sends size bytes (buf, repeated, 1 MiB writes) from a Go
// server to a Go client over one loopback connection. It returns MiB/s from
// the dial to the last byte read, and the CPU both ends spent, per GiB.
func loopbackTCP(ctx context.Context, buf []byte, size int64) (rate, cpu float64, err error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, 0, err
	}
	defer l.Close()
	sent := make(chan error, 1)
	go func() {
		c, err := l.Accept()
		if err != nil {
			sent <- err
			return
		}
		defer c.Close()
		for done := int64(0); done < size; {
			off := done % int64(len(buf))
			n := min(MiB, size-done, int64(len(buf))-off)
			if _, err := c.Write(buf[off : off+n]); err != nil {
				sent <- err
				return
			}
			done += n
		}
		sent <- nil
	}()
	cpu0, t0 := selfCPU(), time.Now()
	var d net.Dialer
	c, err := d.DialContext(ctx, "tcp", l.Addr().String())
	if err != nil {
		return 0, 0, err
	}
	defer c.Close()
	stop := context.AfterFunc(ctx, func() { c.Close() })
	defer stop()
	rbuf := make([]byte, 256<<10)
	n, err := io.CopyBuffer(sink(), io.LimitReader(c, size), rbuf)
	elapsed := time.Since(t0)
	if err == nil && n != size {
		err = fmt.Errorf("%w: %d bytes, want %d", ErrShort, n, size)
	}
	if err != nil {
		return 0, 0, err
	}
	if err := <-sent; err != nil {
		return 0, 0, err
	}
	return mibps(size, elapsed), perGiB(selfCPU()-cpu0, size), nil
}
