//go:build nvml && cgo

package agent

import "github.com/NVIDIA/go-nvml/pkg/nvml"

// NVMLCompiled says whether --gpus auto can use NVML in this build.
const NVMLCompiled = true

func autoInventory() (Inventory, error) { return NewNVML(nvml.New()) }
