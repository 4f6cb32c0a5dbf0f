package score

// Arbiter is Arbiter's default scorer. Placeholder: FGD until measured.
type Arbiter struct{ fgd *FGD }

// NewArbiter returns Arbiter's default scorer for the given typical pods.
func NewArbiter(typical []TypicalPod) *Arbiter { return &Arbiter{fgd: NewFGD(typical)} }

// Name implements Scorer.
func (*Arbiter) Name() string { return "arbiter" }

// Score implements Scorer.
func (s *Arbiter) Score(n *Node, r *Request, gpus []int) (int64, []int) {
	return s.fgd.Score(n, r, gpus)
}
