package httproute

import (
	"fmt"
	"io"
	"os"

	"github.com/cockroachdb/errors"

	"github.com/settle-dev/settle/adapter"
	"github.com/settle-dev/settle/events"
)

func defaultPolicy() events.Policy { return adapter.DefaultPolicy() }

// Check returns every problem of a route file, each a *RouteError naming
// route and field; nil when the file is valid. env resolves ${env:NAME}
// (nil: os.LookupEnv); a missing variable is a problem of the header or
// base_url that names it. No error holds a header value, an environment
// value or a URL.
func Check(data []byte, env func(string) (string, bool)) []error {
	_, errs := parse(data, env)
	if len(errs) == 0 {
		return nil
	}
	out := make([]error, len(errs))
	for i, e := range errs {
		out[i] = e
	}
	return out
}

// Lint is Check with warnings: errs are the problems that make the file
// unusable (Check's), warnings what works but lets settle see less than
// it could (a constant visibility, no creation time). Both are
// *RouteErrors.
func Lint(data []byte, env func(string) (string, bool)) (errs, warnings []error) {
	_, es, ws := parseAll(data, env)
	return asErrors(es), asErrors(ws)
}

// RouteNames are the names of a route file's routes, in file order (nil
// when the file cannot be decoded). Nothing is checked or resolved.
func RouteNames(data []byte) []string {
	cfgs, _, errs := decodeFile(data)
	if cfgs == nil && len(errs) > 0 {
		return nil
	}
	out := make([]string, 0, len(cfgs))
	for _, c := range cfgs {
		out = append(out, c.Name)
	}
	return out
}

func asErrors(l []*RouteError) []error {
	var out []error
	for _, e := range l {
		out = append(out, e)
	}
	return out
}

func parse(data []byte, env func(string) (string, bool)) ([]RouteConfig, []*RouteError) {
	cfgs, errs, _ := parseAll(data, env)
	return cfgs, errs
}

// LintOffline is Lint without the environment: every ${env:NAME} stands
// for a placeholder (a URL where it starts base_url), so a file can be
// checked where its secrets are not (CI). What only the real values can
// show — a variable that is unset, a base_url that is not a URL — is not
// checked.
func LintOffline(data []byte) (errs, warnings []error) {
	_, es, ws := parseWith(data, nil, true)
	return asErrors(es), asErrors(ws)
}

func parseAll(data []byte, env func(string) (string, bool)) ([]RouteConfig, []*RouteError, []*RouteError) {
	return parseWith(data, env, false)
}

func parseWith(data []byte, env func(string) (string, bool), offline bool) ([]RouteConfig, []*RouteError, []*RouteError) {
	if env == nil {
		env = os.LookupEnv
	}
	cfgs, failed, errs := decodeFile(data)
	var warnings []*RouteError
	pool := &upstreamPool{}
	for i := range cfgs {
		cfgs[i].Env, cfgs[i].upstreams = env, pool
		label := cfgs[i].Name
		if events.ValidateToken("name", label) != nil {
			label = fmt.Sprintf("routes[%d]", i)
		}
		if failed[i][""] { // the route is not a mapping: reported
			continue
		}
		_, c := compileWith(&compiler{label: label, failed: failed[i], offline: offline}, cfgs[i])
		errs = append(errs, c.errs...)
		warnings = append(warnings, c.warnings...)
	}
	return cfgs, errs, warnings
}

// Parse decodes and checks a route file. The error joins every problem
// (see Check); the configs are returned only when there is none. env
// resolves ${env:NAME} (nil: os.LookupEnv) and is kept in each config's
// Env for Build.
func Parse(data []byte, env func(string) (string, bool)) ([]RouteConfig, error) {
	cfgs, errs := parse(data, env)
	if len(errs) > 0 {
		return nil, joinErrors(errs)
	}
	return cfgs, nil
}

func joinErrors(errs []*RouteError) error {
	out := make([]error, len(errs))
	for i, e := range errs {
		out[i] = e
	}
	return errors.Join(out...)
}

// Build checks cfg and returns its adapter.Route: the route's name, a
// generic *Adapter and its policy. The error joins every problem, each a
// *RouteError. A RouteConfig built in Go should start its Policy from
// adapter.DefaultPolicy() (a zero Policy is taken as the default).
func Build(cfg RouteConfig) (adapter.Route, error) {
	a, err := New(cfg)
	if err != nil {
		return adapter.Route{}, err
	}
	return adapter.Route{Name: cfg.Name, Adapter: a, Policy: a.routePolicy}, nil
}

// New checks cfg and returns its Adapter (Build without the Route).
func New(cfg RouteConfig) (*Adapter, error) {
	label := cfg.Name
	if events.ValidateToken("name", label) != nil {
		label = "?"
	}
	a, errs := compile(cfg, label, nil)
	if len(errs) > 0 {
		return nil, joinErrors(errs)
	}
	if a.up != nil {
		a.up = cfg.upstreams.share(a.up)
	}
	return a, nil
}

// Load reads a route file and builds every route in it. The error names
// the file and joins every problem (each a *RouteError, see Check).
func Load(path string, env func(string) (string, bool)) ([]adapter.Route, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, errors.Errorf("httproute: %w", err)
	}
	data, err := io.ReadAll(io.LimitReader(f, MaxFileSize+1))
	_ = f.Close()
	if err != nil {
		return nil, errors.Errorf("httproute: %w", err)
	}
	cfgs, err := Parse(data, env)
	if err != nil {
		return nil, errors.Errorf("httproute: %s: %w", path, err)
	}
	routes := make([]adapter.Route, 0, len(cfgs))
	for _, cfg := range cfgs {
		r, err := Build(cfg)
		if err != nil {
			return nil, errors.Errorf("httproute: %s: %w", path, err)
		}
		routes = append(routes, r)
	}
	return routes, nil
}
