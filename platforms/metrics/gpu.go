package metrics

import (
	"log/slog"
	"strconv"
	"strings"

	"github.com/prometheus/client_golang/prometheus"
)

// GPU metrics (triton-inference-server/server docs/user_guide/metrics.md,
// GPU Metrics): one series per visible GPU, label gpu_uuid,
// read through NVML (gpu_nvml.go) at each poll.

// gpuReader reads one GPU's figures. NVML implements it; tests use an
// in-process fake.
type gpuReader interface {
	Utilization() (float64, error)           // fraction of time busy, 0 to 1
	Memory() (total, used uint64, err error) // framebuffer, bytes
	PowerUsage() (float64, error)            // watts
	PowerLimit() (float64, error)            // watts
	Energy() (uint64, error)                 // millijoules since the driver loaded
}

// gpuDevice is one GPU to report.
type gpuDevice struct {
	uuid string
	r    gpuReader
}

// gpuOpener finds the GPUs to report and returns what releases the
// library; an error means GPU monitoring is unavailable.
type gpuOpener func(visible func(index int, uuid string) bool) (devices []gpuDevice, closeLib func(), err error)

// The readings of one device, each with its own failure count.
const (
	readUtil = iota
	readMemTotal
	readMemUsed
	readPower
	readPowerLimit
	readEnergy
	numReadings
)

// maxGPUFailures is how many consecutive failures of one reading stop its
// updates, as in Triton.
const maxGPUFailures = 3

const mib = 1 << 20

// gpuGauges are the GPU families and the state between polls.
type gpuGauges struct {
	util, memTotal, memUsed, power, powerLimit *prometheus.GaugeVec
	energy                                     *prometheus.CounterVec
	devices                                    []*gpuState
	closeLib                                   func()
}

type gpuState struct {
	gpuDevice
	fails      [numReadings]int
	lastEnergy uint64
	haveEnergy bool
}

// newGPUGauges opens the GPUs and registers their families on reg. It
// returns nil and why when there is nothing to report: monitoring cannot
// start, or no GPU is visible (then err is nil).
func newGPUGauges(reg *prometheus.Registry, open gpuOpener, cudaVisible *string) (*gpuGauges, error) {
	devices, closeLib, err := open(visibleGPU(cudaVisible))
	if err != nil {
		return nil, err
	}
	if len(devices) == 0 {
		closeLib()
		return nil, nil
	}
	gauge := func(name, help string) *prometheus.GaugeVec {
		return prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: name, Help: help}, []string{"gpu_uuid"})
	}
	g := &gpuGauges{
		util:       gauge("nv_gpu_utilization", "GPU utilization rate [0.0 - 1.0)"),
		memTotal:   gauge("nv_gpu_memory_total_bytes", "GPU total memory, in bytes"),
		memUsed:    gauge("nv_gpu_memory_used_bytes", "GPU used memory, in bytes"),
		power:      gauge("nv_gpu_power_usage", "GPU power usage in watts"),
		powerLimit: gauge("nv_gpu_power_limit", "GPU power management limit in watts"),
		energy: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "nv_energy_consumption",
			Help: "GPU energy consumption in joules since the server started"}, []string{"gpu_uuid"}),
		closeLib: closeLib,
	}
	for _, d := range devices {
		g.devices = append(g.devices, &gpuState{gpuDevice: d})
		// Series exist (at 0) from the start, as Triton creates them.
		for _, v := range []*prometheus.GaugeVec{g.util, g.memTotal, g.memUsed, g.power, g.powerLimit} {
			v.WithLabelValues(d.uuid)
		}
		g.energy.WithLabelValues(d.uuid)
	}
	reg.MustRegister(g.util, g.memTotal, g.memUsed, g.power, g.powerLimit, g.energy)
	return g, nil
}

// visibleGPU reads CUDA_VISIBLE_DEVICES (nil: unset, every GPU): device
// indices, or UUIDs or their prefixes as CUDA takes them. NVML numbers
// devices in PCI bus order, which is CUDA's with CUDA_DEVICE_ORDER=PCI_BUS_ID.
func visibleGPU(cudaVisible *string) func(int, string) bool {
	if cudaVisible == nil {
		return func(int, string) bool { return true }
	}
	var entries []string
	for e := range strings.SplitSeq(*cudaVisible, ",") {
		if e = strings.TrimSpace(e); e != "" {
			entries = append(entries, e)
		}
	}
	return func(index int, uuid string) bool {
		for _, e := range entries {
			if n, err := strconv.Atoi(e); err == nil {
				if n == index {
					return true
				}
				continue
			}
			if strings.HasPrefix(e, "GPU-") && strings.HasPrefix(uuid, e) {
				return true
			}
		}
		return false
	}
}

// poll reads every device. A failed reading sets its value to 0 for this
// poll (energy is not incremented); after maxGPUFailures in a row the
// reading is no longer taken and its series keeps its value.
func (g *gpuGauges) poll(log *slog.Logger) {
	for _, d := range g.devices {
		d.poll(g, log)
	}
}

func (d *gpuState) poll(g *gpuGauges, log *slog.Logger) {
	set := func(reading int, v *prometheus.GaugeVec, value float64, err error) {
		if d.fails[reading] >= maxGPUFailures {
			return
		}
		if err != nil {
			d.fail(reading, log, err)
			value = 0
		} else {
			d.fails[reading] = 0
		}
		v.WithLabelValues(d.uuid).Set(value)
	}
	if d.fails[readUtil] < maxGPUFailures {
		u, err := d.r.Utilization()
		set(readUtil, g.util, u, err)
	}
	if d.fails[readMemTotal] < maxGPUFailures || d.fails[readMemUsed] < maxGPUFailures {
		// Triton reads MiB; whole MiB keep the values the same.
		total, used, err := d.r.Memory()
		set(readMemTotal, g.memTotal, float64(total/mib*mib), err)
		set(readMemUsed, g.memUsed, float64(used/mib*mib), err)
	}
	if d.fails[readPower] < maxGPUFailures {
		p, err := d.r.PowerUsage()
		set(readPower, g.power, p, err)
	}
	if d.fails[readPowerLimit] < maxGPUFailures {
		p, err := d.r.PowerLimit()
		set(readPowerLimit, g.powerLimit, p, err)
	}
	if d.fails[readEnergy] < maxGPUFailures {
		e, err := d.r.Energy()
		switch {
		case err != nil:
			d.fail(readEnergy, log, err)
		case !d.haveEnergy:
			// The first good reading is the baseline: the counter counts
			// from the server's start.
			d.lastEnergy, d.haveEnergy, d.fails[readEnergy] = e, true, 0
		default:
			if e > d.lastEnergy {
				g.energy.WithLabelValues(d.uuid).Add(float64(e-d.lastEnergy) * 0.001)
			}
			d.lastEnergy, d.fails[readEnergy] = e, 0
		}
	}
}

var readingNames = [numReadings]string{"utilization", "memory total", "memory used", "power usage", "power limit", "energy"}

func (d *gpuState) fail(reading int, log *slog.Logger, err error) {
	d.fails[reading]++
	if d.fails[reading] == maxGPUFailures {
		log.Warn("GPU metrics: "+readingNames[reading]+" failed "+strconv.Itoa(maxGPUFailures)+" times in a row; no longer updated",
			"gpu_uuid", d.uuid, "err", err)
	}
}

func (g *gpuGauges) close() {
	if g != nil && g.closeLib != nil {
		g.closeLib()
	}
}
