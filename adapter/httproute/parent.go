package httproute

import (
	"fmt"
	"regexp"
	"strconv"

	"github.com/cockroachdb/errors"
)

// Parent types.
const (
	parentInteger = "integer"
	parentString  = "string"
)

// parentSpec is a compiled parent section.
type parentSpec struct {
	typ      string
	pattern  *regexp.Regexp
	minimum  int64
	maxLen   int
	required bool
}

func (c *compiler) compileParent(a *Adapter, p *ParentConfig) {
	ps := &parentSpec{typ: p.Type, required: true, maxLen: 1024}
	if p.Required != nil {
		ps.required = *p.Required
	}
	switch p.Type {
	case "":
		c.report("parent.type", "is required: integer (an issue number) or string (with a pattern)")
	case parentInteger:
		if p.Pattern != "" {
			c.report("parent.pattern", "applies to type string; an integer parent is a decimal number")
		}
		if p.MaxLength != nil {
			c.report("parent.max_length", "applies to type string")
		}
		if p.Minimum != nil {
			ps.minimum = *p.Minimum
		}
	case parentString:
		if p.Minimum != nil {
			c.report("parent.minimum", "applies to type integer")
		}
		if p.Pattern == "" {
			c.report("parent.pattern", "is required with type string: the RE2 expression a parent must match (e.g. '^[A-Z][A-Z0-9]+-[0-9]+$')")
		} else if re, err := regexp.Compile(p.Pattern); err != nil {
			c.report("parent.pattern", "is not a valid regular expression (RE2 syntax)")
		} else {
			ps.pattern = re
		}
		if p.MaxLength != nil {
			if *p.MaxLength < 1 || *p.MaxLength > 1024 {
				c.report("parent.max_length", "must be between 1 and 1024")
			} else {
				ps.maxLen = *p.MaxLength
			}
		}
	default:
		c.report("parent.type", fmt.Sprintf("%q is not integer or string", clip(p.Type)))
	}
	a.parent = ps
}

// check refuses a parent that does not fit the declared shape. The error
// never quotes the value.
func (ps *parentSpec) check(parent string) error {
	if parent == "" {
		if ps.required {
			return errors.New("is required by the route (parent: ...)")
		}
		return nil
	}
	if len(parent) > ps.maxLen || !printable(parent) {
		return errors.Errorf("must be at most %d printable bytes", ps.maxLen)
	}
	switch ps.typ {
	case parentInteger:
		n, err := strconv.ParseInt(parent, 10, 64)
		if err != nil || parent[0] == '+' || parent[0] == '-' || (len(parent) > 1 && parent[0] == '0') {
			return errors.New("must be a decimal number (the route declares parent: {type: integer})")
		}
		if n < ps.minimum {
			return errors.Errorf("must be at least %d", ps.minimum)
		}
	case parentString:
		if ps.pattern != nil && !ps.pattern.MatchString(parent) {
			return errors.Errorf("does not match the route's parent.pattern %s", strconv.Quote(ps.pattern.String()))
		}
	}
	return nil
}

// CheckParent refuses a parent that does not fit the route's parent
// section (adapter.ParentChecker): empty when required, not a decimal
// number for type integer, not matching the pattern for type string.
// The error names the rule, never the value. Without a parent section
// every parent passes.
func (a *Adapter) CheckParent(parent string) error {
	if a.parent == nil {
		return nil
	}
	if err := a.parent.check(parent); err != nil {
		return errors.Errorf("parent: %w", err)
	}
	return nil
}

// usesParent: a URL of the route (write, search, readback, status) uses
// {{parent}}.
func (a *Adapter) urlsUsingParent() []string {
	var out []string
	if a.write != nil && a.write.url != nil && a.write.url.uses(varParent) {
		out = append(out, "write.url")
	}
	if a.search != nil && a.search.url != nil && a.search.url.uses(varParent) {
		out = append(out, "search.url")
	}
	if a.readback != nil && a.readback.url != nil && a.readback.url.uses(varParent) {
		out = append(out, "readback.url")
	}
	if a.status != nil && a.status.url != nil && a.status.url.uses(varParent) {
		out = append(out, "status.url")
	}
	return out
}
