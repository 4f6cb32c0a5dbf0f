package serving

import (
	"fmt"
	"time"

	"github.com/arbiterhq/arbiter/internal/trace"
)

// GPUModel names a GPU model as the fleet catalog does ("H100-80G", ...).
type GPUModel string

// The GPU models with a built-in profile.
const (
	T4       GPUModel = "T4"
	A10      GPUModel = "A10"
	A100_40G GPUModel = "A100-40G"
	A100_80G GPUModel = "A100-80G"
	H100_80G GPUModel = "H100-80G"
	H200     GPUModel = "H200-141G"
	MI300X   GPUModel = "MI300X-192G"
)

// Profile is how fast one replica of the served model runs on one GPU model.
// A request of c context and g generated tokens
//
//   - keeps the user waiting Overhead + c/PrefillTPS + g/DecodeTPS after it
//     starts (its in-service latency), and
//   - occupies the replica for c/PrefillTPS + g/(Batch·DecodeTPS) (its
//     occupancy): prefill is compute-bound and runs one request at a time,
//     decode is memory-bound and Batch requests share each decode step.
//
// The queueing model treats each replica as one server whose service time is
// the occupancy; see the package documentation.
//
// With a context cache (ContextCacheHit h > 0), a share h of every prompt's
// tokens is found in the replica's prefix (KV) cache — the user's context
// from their previous request — and only c·(1−h) tokens are prefilled.
//
// The first token reaches the user Overhead + c·(1−h)/PrefillTPS after the
// request starts (its in-service time to first token); each later token
// takes one decode step (TPOT).
type Profile struct {
	GPU            GPUModel
	GPUsPerReplica int
	PrefillTPS     float64       // prompt tokens per second per replica
	DecodeTPS      float64       // generated tokens per second per request stream at Batch
	Batch          int           // concurrent decode streams per replica
	Overhead       time.Duration // per request: tokenisation, scheduling, in-region hops
	// ContextCacheHit is the share of prompt tokens served from the
	// prefix cache, in [0, 1); 0: every token is prefilled.
	ContextCacheHit float64
	// StepBase and StepPerStream describe the decode step (one token for
	// every active stream): StepBase + streams·StepPerStream, the time to
	// read the weights plus each stream's KV cache. Zero for a profile
	// given by hand: TPOT is then 1/DecodeTPS at any load.
	StepBase      time.Duration
	StepPerStream time.Duration
}

// Validate reports the first invalid field.
func (p Profile) Validate() error {
	switch {
	case p.GPU == "":
		return fmt.Errorf("serving: profile: empty GPU model")
	case p.GPUsPerReplica < 1:
		return fmt.Errorf("serving: profile %s: gpus per replica %d < 1", p.GPU, p.GPUsPerReplica)
	case !(p.PrefillTPS > 0) || !(p.DecodeTPS > 0):
		return fmt.Errorf("serving: profile %s: token rates must be > 0 (prefill %g, decode %g)", p.GPU, p.PrefillTPS, p.DecodeTPS)
	case p.Batch < 1:
		return fmt.Errorf("serving: profile %s: batch %d < 1", p.GPU, p.Batch)
	case p.Overhead < 0:
		return fmt.Errorf("serving: profile %s: negative overhead %v", p.GPU, p.Overhead)
	case !(p.ContextCacheHit >= 0 && p.ContextCacheHit < 1):
		return fmt.Errorf("serving: profile %s: context cache hit %v not in [0, 1)", p.GPU, p.ContextCacheHit)
	case p.StepBase < 0 || p.StepPerStream < 0:
		return fmt.Errorf("serving: profile %s: negative decode step (%v, %v)", p.GPU, p.StepBase, p.StepPerStream)
	}
	return nil
}

// Job is what one request costs a replica.
type Job struct {
	Occupancy  time.Duration // time the replica is busy with the request
	Latency    time.Duration // time from start of service to the last token
	FirstToken time.Duration // time from start of service to the first token
}

// Job returns the cost of a request of the given size.
func (p Profile) Job(s trace.TokenSizes) Job {
	prefill := float64(s.Context) * (1 - p.ContextCacheHit) / p.PrefillTPS
	occ := prefill + float64(s.Generated)/(float64(p.Batch)*p.DecodeTPS)
	first := p.Overhead.Seconds() + prefill
	lat := first + float64(s.Generated)/p.DecodeTPS
	return Job{Occupancy: seconds(occ), Latency: seconds(lat), FirstToken: seconds(first)}
}

// TPOT is the time per output token of a replica that generates
// tokensPerSec tokens per second over all its streams. By Little's law the
// active streams are b = tokensPerSec·step(b), with step(b) = StepBase +
// b·StepPerStream, so b = tokensPerSec·StepBase/(1 − tokensPerSec·StepPerStream),
// at least 1 and at most Batch (a replica asked for more runs a full batch
// and queues the rest). TPOT is step(b): a lightly loaded replica decodes
// faster than a full one. Without a step model it is 1/DecodeTPS.
func (p Profile) TPOT(tokensPerSec float64) time.Duration {
	if p.StepBase <= 0 && p.StepPerStream <= 0 {
		return seconds(1 / p.DecodeTPS)
	}
	base, per := p.StepBase.Seconds(), p.StepPerStream.Seconds()
	x := clampPos(tokensPerSec)
	b := float64(p.Batch)
	if den := 1 - x*per; den > 0 {
		b = min(b, x*base/den)
	}
	b = max(1, b)
	return seconds(base + b*per)
}

// Hardware is the part of a GPU's datasheet that sets LLM serving speed.
type Hardware struct {
	GPU            GPUModel
	MemoryGB       float64 // usable HBM/GDDR per GPU, GB
	DenseTFLOPS    float64 // peak dense FP16/BF16 tensor TFLOPS per GPU
	BandwidthGBs   float64 // peak memory bandwidth per GPU, GB/s
	MFU            float64 // fraction of peak FLOPS reached in prefill
	BandwidthEff   float64 // fraction of peak bandwidth reached in decode
	GPUsPerReplica int
	BytesPerParam  float64 // weights: 2 for FP16, ≈0.56 for 4-bit AWQ with scales
	MaxBatch       int     // latency-oriented cap on concurrent streams
}

// LLM is the served model.
type LLM struct {
	Name            string
	Params          float64 // parameters
	KVBytesPerToken float64 // K and V cache per token, all layers
	TokensPerStream float64 // mean context+generated tokens held per stream in the KV cache
}

// Reference7B is the reference coding model: a 7B-class decoder in FP16 with
// full multi-head attention (CodeLlama-7B-like: 6.7e9 parameters, 32 layers,
// hidden 4096, so K+V = 2·32·4096·2 B = 512 KiB per token). The code trace's
// requests hold 2,048 context + 28 generated tokens on average.
var Reference7B = LLM{Name: "code-7b-fp16", Params: 6.7e9, KVBytesPerToken: 2 * 32 * 4096 * 2, TokensPerStream: 2076}

// Datasheets (peak dense tensor FP16/BF16 without sparsity, memory bandwidth)
// from the vendors' product pages: T4 65 TF, 320 GB/s; A10 125 TF, 600 GB/s;
// A100 SXM 312 TF, 1,555 GB/s (40G) and 2,039 GB/s (80G); H100 SXM 989 TF,
// 3,350 GB/s; H200 SXM 989 TF, 4,800 GB/s; MI300X 1,307 TF, 5,300 GB/s.
//
// Efficiencies are assumptions, set from public vLLM/TensorRT-LLM serving
// reports rather than measured here: prefill MFU 25% on the 70 W T4, 40% on
// A10, 55% on A100, 40% on H100/H200 (FP16 kernels leave much of Hopper
// idle), 30% on MI300X (software maturity); decode reaches 60% of peak
// bandwidth on T4, A10 and MI300X, 75% on A100 and 80% on H100/H200. The T4
// (16 GB) serves the model with 4-bit weights (AWQ), everything else in FP16
// on one GPU.
var datasheets = []Hardware{
	{GPU: T4, MemoryGB: 15, DenseTFLOPS: 65, BandwidthGBs: 320, MFU: 0.25, BandwidthEff: 0.60, GPUsPerReplica: 1, BytesPerParam: 0.56, MaxBatch: 8},
	{GPU: A10, MemoryGB: 22.5, DenseTFLOPS: 125, BandwidthGBs: 600, MFU: 0.40, BandwidthEff: 0.60, GPUsPerReplica: 1, BytesPerParam: 2, MaxBatch: 8},
	{GPU: A100_40G, MemoryGB: 40, DenseTFLOPS: 312, BandwidthGBs: 1555, MFU: 0.55, BandwidthEff: 0.75, GPUsPerReplica: 1, BytesPerParam: 2, MaxBatch: 32},
	{GPU: A100_80G, MemoryGB: 80, DenseTFLOPS: 312, BandwidthGBs: 2039, MFU: 0.55, BandwidthEff: 0.75, GPUsPerReplica: 1, BytesPerParam: 2, MaxBatch: 32},
	{GPU: H100_80G, MemoryGB: 80, DenseTFLOPS: 989, BandwidthGBs: 3350, MFU: 0.40, BandwidthEff: 0.80, GPUsPerReplica: 1, BytesPerParam: 2, MaxBatch: 32},
	{GPU: H200, MemoryGB: 141, DenseTFLOPS: 989, BandwidthGBs: 4800, MFU: 0.40, BandwidthEff: 0.80, GPUsPerReplica: 1, BytesPerParam: 2, MaxBatch: 48},
	{GPU: MI300X, MemoryGB: 192, DenseTFLOPS: 1307, BandwidthGBs: 5300, MFU: 0.30, BandwidthEff: 0.60, GPUsPerReplica: 1, BytesPerParam: 2, MaxBatch: 64},
}

// Datasheets returns the built-in hardware descriptions, in the order T4,
// A10, A100-40G, A100-80G, H100-80G, H200-141G, MI300X-192G.
func Datasheets() []Hardware { return append([]Hardware(nil), datasheets...) }

// DefaultOverhead is the fixed per-request time of the built-in profiles.
const DefaultOverhead = 15 * time.Millisecond

// activationReserve is memory kept free for activations and the runtime, GB.
const activationReserve = 3

// Derive computes a replica's profile for model m on hardware h:
//
//	prefill tokens/s = GPUs·TFLOPS·MFU / (2·params)          (2 FLOPs per parameter per token)
//	batch            = min(MaxBatch, KV memory / (KVBytesPerToken·TokensPerStream))
//	decode step      = (weight bytes + batch·KV bytes per stream) / (GPUs·bandwidth·efficiency)
//	decode tokens/s  = 1 / decode step                         (per stream)
//
// It fails when the weights do not fit in memory.
func Derive(h Hardware, m LLM) (Profile, error) {
	g := float64(max(1, h.GPUsPerReplica))
	weightsGB := m.Params * h.BytesPerParam / 1e9
	kvRoomGB := g*h.MemoryGB - weightsGB - activationReserve
	streamGB := m.KVBytesPerToken * m.TokensPerStream / 1e9
	if kvRoomGB < streamGB {
		return Profile{}, fmt.Errorf("serving: %s does not fit %s: %.1f GB of weights in %.0f GB", m.Name, h.GPU, weightsGB, g*h.MemoryGB)
	}
	batch := min(h.MaxBatch, int(kvRoomGB/streamGB))
	step := (weightsGB + float64(batch)*streamGB) / (g * h.BandwidthGBs * h.BandwidthEff)
	bw := g * h.BandwidthGBs * h.BandwidthEff
	p := Profile{
		GPU:            h.GPU,
		GPUsPerReplica: int(g),
		PrefillTPS:     g * h.DenseTFLOPS * 1e12 * h.MFU / (2 * m.Params),
		DecodeTPS:      1 / step,
		Batch:          batch,
		Overhead:       DefaultOverhead,
		StepBase:       seconds(weightsGB / bw),
		StepPerStream:  seconds(streamGB / bw),
	}
	return p, p.Validate()
}

// DefaultProfiles returns the built-in profiles: Reference7B derived on each
// datasheet. Rounded (prefill tok/s, decode tok/s per stream, batch):
// T4 1,213, 16.9, 7; A10 3,731, 19.1, 5; A100-40G 12,806, 32.2, 21;
// A100-80G 12,806, 31.7, 32; H100-80G 29,522, 55.6, 32; H200-141G 29,522,
// 58.5, 48; MI300X-192G 29,261, 38.3, 64. On the code trace (2,048 prompt
// and 28 generated tokens on average) an H100 replica serves about 11.8
// requests/s, mean in-service latency 0.59 s, p99 4.6 s.
func DefaultProfiles() []Profile {
	out := make([]Profile, 0, len(datasheets))
	for _, h := range datasheets {
		p, err := Derive(h, Reference7B)
		if err != nil {
			panic(err) // the built-in table is checked by TestDefaultProfiles
		}
		out = append(out, p)
	}
	return out
}

// LookupProfile returns the built-in profile of a GPU model.
func LookupProfile(gpu GPUModel) (Profile, bool) {
	for _, p := range DefaultProfiles() {
		if p.GPU == gpu {
			return p, true
		}
	}
	return Profile{}, false
}

func seconds(s float64) time.Duration { return time.Duration(s * float64(time.Second)) }
