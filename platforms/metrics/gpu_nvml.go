package metrics

import (
	"fmt"

	"github.com/NVIDIA/go-nvml/pkg/nvml"
)

// openNVML opens the visible GPUs through NVML. go-nvml loads
// libnvidia-ml.so.1 when Init runs, so a machine without the NVIDIA driver
// gets an error here, never a missing-library failure at start-up.
// Devices whose UUID cannot be read are left out, as Triton leaves out
// devices whose attributes it cannot read.
func openNVML(visible func(index int, uuid string) bool) ([]gpuDevice, func(), error) {
	lib := nvml.New()
	if ret := lib.Init(); ret != nvml.SUCCESS {
		return nil, nil, fmt.Errorf("NVML: %s", lib.ErrorString(ret))
	}
	closeLib := func() { _ = lib.Shutdown() }
	n, ret := lib.DeviceGetCount()
	if ret != nvml.SUCCESS {
		closeLib()
		return nil, nil, fmt.Errorf("NVML device count: %s", lib.ErrorString(ret))
	}
	var devices []gpuDevice
	for i := range n {
		d, ret := lib.DeviceGetHandleByIndex(i)
		if ret != nvml.SUCCESS {
			continue
		}
		uuid, ret := d.GetUUID()
		if ret != nvml.SUCCESS || !visible(i, uuid) {
			continue
		}
		devices = append(devices, gpuDevice{uuid: uuid, r: nvmlDevice{d}})
	}
	return devices, closeLib, nil
}

// nvmlDevice reads one device through NVML.
type nvmlDevice struct{ d nvml.Device }

func nvmlErr(what string, ret nvml.Return) error {
	if ret == nvml.SUCCESS {
		return nil
	}
	return fmt.Errorf("NVML %s: %s", what, nvml.ErrorString(ret))
}

func (n nvmlDevice) Utilization() (float64, error) {
	u, ret := n.d.GetUtilizationRates()
	return float64(u.Gpu) * 0.01, nvmlErr("utilization", ret)
}

func (n nvmlDevice) Memory() (total, used uint64, err error) {
	m, ret := n.d.GetMemoryInfo()
	return m.Total, m.Used, nvmlErr("memory", ret)
}

func (n nvmlDevice) PowerUsage() (float64, error) {
	mw, ret := n.d.GetPowerUsage()
	return float64(mw) * 0.001, nvmlErr("power usage", ret)
}

func (n nvmlDevice) PowerLimit() (float64, error) {
	mw, ret := n.d.GetPowerManagementLimit()
	return float64(mw) * 0.001, nvmlErr("power limit", ret)
}

func (n nvmlDevice) Energy() (uint64, error) {
	mj, ret := n.d.GetTotalEnergyConsumption()
	return mj, nvmlErr("energy", ret)
}
