package policy

import (
	"fmt"
	"slices"
	"strings"
	"time"

	"cel.dev/cel-go/cel"
	celast "cel.dev/cel-go/common/ast"
	"cel.dev/cel-go/common/types"
	"cel.dev/cel-go/common/types/ref"
)

// CEL conditions. Every metric is a function of one string argument, the
// target ("service:chat", "pool:gpu_a100", a bare name, or "cluster"), or of
// none (the whole cluster):
//
//	p95_latency('service:chat') > duration('150ms')
//	utilization() > 0.85 && pending_gpus('tenant:research') >= 64.0
//
// Time metrics (latencies, queue_wait) return a CEL duration; the others a
// double in base units (utilization 0.85 for 85%, spot_price in dollars per
// GPU-hour). The variable now is the evaluation time, a timestamp.

// exprScope is what metric functions read while one expression runs. The
// engine sets it before each evaluation; the engine is single-threaded.
type exprScope struct {
	m   Metrics
	obs []Observation
}

// exprCostLimit bounds the work one evaluation may do.
const exprCostLimit = 100_000

func newCELEnv(scope *exprScope) (*cel.Env, error) {
	opts := []cel.EnvOption{cel.Variable("now", cel.TimestampType)}
	for _, m := range AllMetrics() {
		opts = append(opts, cel.Function(m.String(),
			cel.Overload(m.String()+"_target", []*cel.Type{cel.StringType}, celType(m),
				cel.UnaryBinding(func(arg ref.Val) ref.Val {
					s, ok := arg.(types.String)
					if !ok {
						return types.NewErr("%s: want a target name", m)
					}
					return scope.lookup(m, string(s))
				})),
			cel.Overload(m.String()+"_cluster", nil, celType(m),
				cel.FunctionBinding(func(...ref.Val) ref.Val { return scope.lookup(m, "cluster") })),
		))
	}
	return cel.NewEnv(opts...)
}

func celType(m Metric) *cel.Type {
	if m.Dim() == DimDuration {
		return cel.DurationType
	}
	return cel.DoubleType
}

func (s *exprScope) lookup(m Metric, target string) ref.Val {
	t, err := ParseTarget(target)
	if err != nil {
		return types.NewErr("%s(%q): %v", m, target, err)
	}
	if s.m == nil {
		return types.NewErr("%s(%q): no metrics", m, target)
	}
	v, ok := s.m.Value(Query{Metric: m, Target: t})
	if !ok {
		return types.NewErr("%s of %s: no data", m, t)
	}
	s.obs = append(s.obs, Observation{Metric: m, Target: t, Value: v})
	if m.Dim() == DimDuration {
		return types.Duration{Duration: time.Duration(v * float64(time.Second))}
	}
	return types.Double(v)
}

// compileExpr type-checks an expression; it must be a bool.
func compileExpr(env *cel.Env, src string) (*cel.Ast, error) {
	ast, iss := env.Compile(src)
	if iss != nil && iss.Err() != nil {
		return nil, fmt.Errorf("invalid CEL expression: %s", strings.ReplaceAll(iss.Err().Error(), "\n", " "))
	}
	if ast.OutputType() != cel.BoolType {
		return nil, fmt.Errorf("expression gives a %s, want true or false: compare it, such as utilization() > 0.85", ast.OutputType())
	}
	return ast, nil
}

// exprTargets returns the constant target arguments of metric calls.
func exprTargets(ast *cel.Ast) []Target {
	var out []Target
	root := celast.NavigateAST(ast.NativeRep())
	for _, m := range AllMetrics() {
		for _, call := range celast.MatchDescendants(root, celast.FunctionMatcher(m.String())) {
			args := call.AsCall().Args()
			if len(args) != 1 || args[0].Kind() != celast.LiteralKind {
				continue
			}
			if s, ok := args[0].AsLiteral().(types.String); ok {
				if t, err := ParseTarget(string(s)); err == nil {
					out = append(out, t)
				}
			}
		}
	}
	return out
}

// exprMetrics returns the metrics an expression calls.
func exprMetrics(ast *cel.Ast) []Metric {
	var out []Metric
	root := celast.NavigateAST(ast.NativeRep())
	for _, m := range AllMetrics() {
		if len(celast.MatchDescendants(root, celast.FunctionMatcher(m.String()))) > 0 {
			out = append(out, m)
		}
	}
	return out
}

// Metrics returns the metrics the policy's conditions read (metric
// leaves and the metric functions expressions call), each once, in the
// order first met: what a runtime must sample for it.
func (p *Policy) Metrics() []Metric {
	var out []Metric
	add := func(m Metric) {
		if m != MetricNone && !slices.Contains(out, m) {
			out = append(out, m)
		}
	}
	var env *cel.Env
	var walk func(c *Condition)
	walk = func(c *Condition) {
		switch c.Kind {
		case CondMetric:
			add(c.Metric)
		case CondExpr:
			if env == nil {
				var err error
				if env, err = newCELEnv(&exprScope{}); err != nil {
					return
				}
			}
			if ast, err := compileExpr(env, c.Expr); err == nil {
				for _, m := range exprMetrics(ast) {
					add(m)
				}
			}
		case CondAll, CondAny:
			for i := range c.Children {
				walk(&c.Children[i])
			}
		}
	}
	for i := range p.Rules {
		walk(&p.Rules[i].When)
	}
	return out
}

// Reads reports whether the policy's conditions read metric m.
func (p *Policy) Reads(m Metric) bool { return slices.Contains(p.Metrics(), m) }

// compileExprs type-checks every expr leaf of c, reporting problems.
func (l *loader) compileExprs(c *Condition) {
	var env *cel.Env
	var walk func(c *Condition)
	walk = func(c *Condition) {
		switch c.Kind {
		case CondExpr:
			if strings.TrimSpace(c.Expr) == "" {
				return
			}
			if env == nil {
				var err error
				if env, err = newCELEnv(&exprScope{}); err != nil {
					l.errs.Add(c.Pos, c.Path+".expr", "policy: CEL environment: %v", err)
					return
				}
			}
			if _, err := compileExpr(env, c.Expr); err != nil {
				l.errs.Add(c.Pos, c.Path+".expr", "%v", err)
			}
		case CondAll, CondAny:
			for i := range c.Children {
				walk(&c.Children[i])
			}
		}
	}
	walk(c)
}
