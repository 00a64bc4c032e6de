package gpu

import "unsafe"

// Host memory, streams and copies in the Go fake driver.

func (f *fakeDriver) hostAlloc(dev int, n int64, node int) ([]byte, error) {
	err := f.begin("hostAlloc", dev)
	defer f.mu.Unlock()
	if err != nil {
		return nil, err
	}
	if _, err := f.device("hostAlloc", dev); err != nil {
		return nil, err
	}
	if n <= 0 {
		f.misuse("hostAlloc of %d bytes", n)
		return nil, fakeError("hostAlloc", cudaErrorInvalidValue)
	}
	b := make([]byte, n)
	lo, _ := span(b)
	f.hosts[lo] = &fakeHost{dev: dev, node: node, mem: b}
	return b, nil
}

func (f *fakeDriver) hostFree(dev int, b []byte) error {
	err := f.begin("hostFree", dev)
	defer f.mu.Unlock()
	if err != nil {
		return err
	}
	if _, err := f.device("hostFree", dev); err != nil {
		return err
	}
	lo, _ := span(b)
	h := f.hosts[lo]
	switch {
	case h == nil:
		f.misuse("hostFree of %d bytes hostAlloc did not return (or already freed)", len(b))
		return fakeError("hostFree", cudaErrorInvalidValue)
	case h.dev != dev:
		f.misuse("hostFree through device %d of a buffer made in device %d's context", dev, h.dev)
		return fakeError("hostFree", cudaErrorInvalidValue)
	case h.queued > 0:
		f.misuse("hostFree of a pinned buffer with %d copies from it still queued", h.queued)
		return fakeError("hostFree", cudaErrorInvalidValue)
	}
	delete(f.hosts, lo)
	return nil
}

// pinnedNodes returns, per device, the NUMA nodes its context's pinned
// buffers were asked for.
func (f *fakeDriver) pinnedNodes() map[int][]int {
	f.mu.Lock()
	defer f.mu.Unlock()
	out := map[int][]int{}
	for _, h := range f.hosts {
		out[h.dev] = append(out[h.dev], h.node)
	}
	return out
}

func (f *fakeDriver) copyAsync(dev, stream int, dst uint64, src []byte) error {
	err := f.begin("copyAsync", dev)
	defer f.mu.Unlock()
	if err != nil {
		return err
	}
	d, err := f.device("copyAsync", dev)
	if err != nil {
		return err
	}
	if stream < 0 || stream >= len(d.streams) {
		f.misuse("copyAsync on stream %d of %d", stream, len(d.streams))
		return fakeError("copyAsync", cudaErrorInvalidHandle)
	}
	a, err := f.findAlloc("copyAsync", dev, dst, int64(len(src)))
	if err != nil {
		return err
	}
	h := f.pinnedHolding(src)
	if h == nil {
		f.misuse("copyAsync from %d bytes of host memory that is not pinned", len(src))
		return fakeError("copyAsync", cudaErrorInvalidValue)
	}
	d.seq++
	d.streams[stream] = append(d.streams[stream], &fakeCopy{seq: d.seq, dst: a, off: int64(dst - a.base), src: src, host: h})
	a.queued++
	h.queued++
	return nil
}

// pinnedHolding returns the pinned buffer that contains all of b.
func (f *fakeDriver) pinnedHolding(b []byte) *fakeHost {
	lo, hi := span(b)
	for base, h := range f.hosts {
		if lo >= base && hi <= base+uintptr(len(h.mem)) {
			return h
		}
	}
	return nil
}

func (f *fakeDriver) record(dev, event, stream int) error {
	err := f.begin("record", dev)
	defer f.mu.Unlock()
	if err != nil {
		return err
	}
	d, err := f.device("record", dev)
	if err != nil {
		return err
	}
	if event < 0 || event >= len(d.events) || stream < 0 || stream >= len(d.streams) {
		f.misuse("record of event %d of %d on stream %d of %d", event, len(d.events), stream, len(d.streams))
		return fakeError("record", cudaErrorInvalidHandle)
	}
	d.events[event] = fakeEvent{stream: stream, seq: d.seq}
	return nil
}

func (f *fakeDriver) wait(dev, event int) error {
	err := f.begin("wait", dev)
	defer f.mu.Unlock()
	if err != nil {
		return err
	}
	d, err := f.device("wait", dev)
	if err != nil {
		return err
	}
	if event < 0 || event >= len(d.events) {
		f.misuse("wait on event %d of %d", event, len(d.events))
		return fakeError("wait", cudaErrorInvalidHandle)
	}
	e := d.events[event]
	f.run(d, e.stream, e.seq) // an event never recorded has seq 0: done
	return nil
}

func (f *fakeDriver) syncStream(dev, stream int) error {
	err := f.begin("syncStream", dev)
	defer f.mu.Unlock()
	if err != nil {
		return err
	}
	d, err := f.device("syncStream", dev)
	if err != nil {
		return err
	}
	if stream < 0 || stream >= len(d.streams) {
		f.misuse("syncStream of stream %d of %d", stream, len(d.streams))
		return fakeError("syncStream", cudaErrorInvalidHandle)
	}
	f.run(d, stream, d.seq)
	return nil
}

func (f *fakeDriver) syncDevice(dev int) error {
	err := f.begin("syncDevice", dev)
	defer f.mu.Unlock()
	if err != nil {
		return err
	}
	d, err := f.device("syncDevice", dev)
	if err != nil {
		return err
	}
	for s := range d.streams {
		f.run(d, s, d.seq)
	}
	f.finishDMA(d)
	return nil
}

// run performs the copies queued on a stream up to seq, in order.
func (f *fakeDriver) run(d *fakeDevice, stream int, seq uint64) {
	q := d.streams[stream]
	for len(q) > 0 && q[0].seq <= seq {
		c := q[0]
		copy(c.dst.mem[c.off:], c.src)
		c.dst.queued--
		c.host.queued--
		q = q[1:]
	}
	d.streams[stream] = q
}

// finishDMA completes the DMA of the last pageable copy.
func (f *fakeDriver) finishDMA(d *fakeDevice) {
	if c := d.dma; c != nil {
		copy(c.dst.mem[c.off:], c.src)
		c.dst.queued--
		d.dma = nil
	}
}

func (f *fakeDriver) copyToHost(dev int, dst []byte, src uint64) error {
	err := f.begin("copyToHost", dev)
	defer f.mu.Unlock()
	if err != nil {
		return err
	}
	d, err := f.device("copyToHost", dev)
	if err != nil {
		return err
	}
	a, err := f.findAlloc("copyToHost", dev, src, int64(len(dst)))
	if err != nil {
		return err
	}
	f.finishDMA(d) // the legacy stream orders it after the pageable copy
	if a.queued > 0 {
		f.misuse("copyToHost from %#x while %d copies into it are queued", a.base, a.queued)
	}
	copy(dst, a.mem[src-a.base:])
	return nil
}

// copyToDevice is cuMemcpyHtoD from pageable memory: the source is taken
// into the driver's staging memory at once, and the call returns while
// the DMA from there is still running. The next synchronous call, or
// syncDevice, finishes it.
func (f *fakeDriver) copyToDevice(dev int, dst uint64, src []byte) error {
	err := f.begin("copyToDevice", dev)
	defer f.mu.Unlock()
	if err != nil {
		return err
	}
	d, err := f.device("copyToDevice", dev)
	if err != nil {
		return err
	}
	a, err := f.findAlloc("copyToDevice", dev, dst, int64(len(src)))
	if err != nil {
		return err
	}
	f.finishDMA(d) // the staging memory is reused: the previous DMA goes first
	d.dma = &fakeCopy{dst: a, off: int64(dst - a.base), src: append([]byte(nil), src...)}
	a.queued++
	return nil
}

// dmaPending reports whether a pageable copy's DMA is still running on dev.
func (f *fakeDriver) dmaPending(dev int) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.devs[dev].dma != nil
}

func (f *fakeDriver) pageable(n int64) ([]byte, error) {
	err := f.begin("pageable", anyDevice)
	defer f.mu.Unlock()
	if err != nil {
		return nil, err
	}
	b := make([]byte, n)
	lo, _ := span(b)
	f.pageables[lo] = len(b)
	return b, nil
}

func (f *fakeDriver) freePageable(b []byte) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.calls["freePageable"]++
	lo, _ := span(b)
	if _, ok := f.pageables[lo]; !ok {
		f.misuse("freePageable of %d bytes pageable did not return (or already freed)", len(b))
		return
	}
	delete(f.pageables, lo)
}

// queuedFrom returns how many queued copies read from pinned memory that
// overlaps b.
func (f *fakeDriver) queuedFrom(b []byte) int {
	lo, hi := span(b)
	f.mu.Lock()
	defer f.mu.Unlock()
	n := 0
	for _, d := range f.devs {
		for _, q := range d.streams {
			for _, c := range q {
				if clo, chi := span(c.src); clo < hi && lo < chi {
					n++
				}
			}
		}
	}
	return n
}

// queuedInto returns how many queued copies write device memory at dptr.
func (f *fakeDriver) queuedInto(dptr uint64) int {
	f.mu.Lock()
	defer f.mu.Unlock()
	if a := f.allocs[dptr]; a != nil {
		return a.queued
	}
	return 0
}

// span returns the address range of b's bytes. Go's heap does not move,
// so addresses identify the buffers the fake handed out.
func span(b []byte) (lo, hi uintptr) {
	lo = uintptr(unsafe.Pointer(unsafe.SliceData(b)))
	return lo, lo + uintptr(len(b))
}
