//go:build !nvml || !cgo

package agent

import "errors"

// NVMLCompiled says whether --gpus auto can use NVML in this build.
const NVMLCompiled = false

func autoInventory() (Inventory, error) {
	return nil, errors.New("agent: --gpus auto needs NVML, and NVML support is not compiled into this binary: build it with `go build -tags nvml ./cmd/arbiter` (needs cgo), or give a fake inventory such as --gpus fake:8xA100-80G")
}
