package api

// PartitionRequest creates or replaces a partition: machines only one
// tenant's subtree may use. Blocks name every machine of a block,
// including machines registered there later.
type PartitionRequest struct {
	Tenant string   `json:"tenant"`
	Blocks []string `json:"blocks,omitempty"`
	Nodes  []string `json:"nodes,omitempty"`
}

// Partition is a stored partition. Machines is every machine it covers
// (its blocks' and its own), GPUs their GPUs.
type Partition struct {
	Name     string   `json:"name"`
	Tenant   string   `json:"tenant"`
	Blocks   []string `json:"blocks"`
	Nodes    []string `json:"nodes"`
	Machines int      `json:"machines"`
	GPUs     int      `json:"gpus"`
	Revision int64    `json:"revision"`
}
