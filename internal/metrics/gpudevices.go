package metrics

import (
	"strconv"

	"github.com/prometheus/client_golang/prometheus"
)

// GPUDevice is one GPU's health as the GPU metrics report it.
type GPUDevice struct {
	Index      int
	UUID       string
	Healthy    bool
	Faults     int64 // sticky faults seen
	Recoveries int64 // context resets that brought it back
}

// RegisterGPUDevices exposes, per GPU and read at scrape time from
// devices: whether it stages (1) or is being recovered from a sticky
// fault or failed to recover (0), and how many faults and recoveries it
// has seen. Labels: device (this process's ordinal) and uuid, bounded by
// the GPUs on the node.
func RegisterGPUDevices(reg prometheus.Registerer, devices func() []GPUDevice) {
	labels := []string{"device", "uuid"}
	reg.MustRegister(&gpuDeviceCollector{
		devices: devices,
		healthy: prometheus.NewDesc(namespace+"_gpu_device_healthy",
			"1 while the GPU stages, 0 while its context is reset after a sticky fault or could not be brought back.", labels, nil),
		faults: prometheus.NewDesc(namespace+"_gpu_device_faults_total",
			"Sticky faults (illegal address, launch failure, uncorrectable ECC, ...) that killed the GPU's context.", labels, nil),
		recoveries: prometheus.NewDesc(namespace+"_gpu_device_recoveries_total",
			"Context resets that brought the GPU back after a sticky fault; its leases were dropped.", labels, nil),
	})
}

type gpuDeviceCollector struct {
	devices                     func() []GPUDevice
	healthy, faults, recoveries *prometheus.Desc
}

func (c *gpuDeviceCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- c.healthy
	ch <- c.faults
	ch <- c.recoveries
}

func (c *gpuDeviceCollector) Collect(ch chan<- prometheus.Metric) {
	for _, d := range c.devices() {
		labels := []string{strconv.Itoa(d.Index), d.UUID}
		healthy := 0.0
		if d.Healthy {
			healthy = 1
		}
		ch <- prometheus.MustNewConstMetric(c.healthy, prometheus.GaugeValue, healthy, labels...)
		ch <- prometheus.MustNewConstMetric(c.faults, prometheus.CounterValue, float64(d.Faults), labels...)
		ch <- prometheus.MustNewConstMetric(c.recoveries, prometheus.CounterValue, float64(d.Recoveries), labels...)
	}
}
