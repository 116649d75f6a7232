package service

import (
	"context"
	"net/url"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/settle-dev/settle/events"
	"github.com/settle-dev/settle/fsm"
	"github.com/settle-dev/settle/ledger"
)

// The operator actions, by the names every transport shows (an intent's
// actions, pending items).
const (
	ActionApprove            = "approve"
	ActionResolveConfirmed   = "resolve_confirmed"
	ActionResolveNotExecuted = "resolve_not_executed"
	ActionAbandon            = "abandon"
)

// Resolutions of a resolve (POST /v1/intents/{id}/resolve, the resolve
// tool): confirmed is ActionResolveConfirmed, not_executed
// ActionResolveNotExecuted, abandoned ActionAbandon.
const (
	ResolutionConfirmed   = "confirmed"
	ResolutionNotExecuted = "not_executed"
	ResolutionAbandoned   = "abandoned"
)

// Resolutions lists the resolutions.
func Resolutions() []string {
	return []string{ResolutionConfirmed, ResolutionNotExecuted, ResolutionAbandoned}
}

var resolutionActions = map[string]string{ResolutionConfirmed: ActionResolveConfirmed,
	ResolutionNotExecuted: ActionResolveNotExecuted, ResolutionAbandoned: ActionAbandon}

// ResolutionAction is the action of a resolution; "" or another word is
// refused, naming the field "resolution".
func ResolutionAction(resolution string) (string, error) {
	if a, ok := resolutionActions[resolution]; ok {
		return a, nil
	}
	if resolution == "" {
		return "", invalid("resolution", "is required (confirmed, not_executed or abandoned)")
	}
	return "", invalid("resolution", "must be confirmed, not_executed or abandoned")
}

// Actions lists the operator actions the intent's state allows now.
func Actions(i *fsm.Intent) []string {
	out := []string{}
	for _, a := range []struct {
		ev   events.Type
		name string
	}{{events.Approved, ActionApprove}, {events.OperatorConfirmed, ActionResolveConfirmed},
		{events.OperatorReleased, ActionResolveNotExecuted}, {events.Abandoned, ActionAbandon}} {
		if i.Can(a.ev) {
			out = append(out, a.name)
		}
	}
	return out
}

// MaxReason bounds an action's reason, in bytes.
const MaxReason = 2000

// Action is one operator decision.
type Action struct {
	// Kind is one of the Action* names.
	Kind string
	// Reason is why (required; recorded with the decision).
	Reason string
	// ExternalID and LiveURL: a confirmed resolution's external object
	// (ExternalID required, LiveURL optional, http(s) without credentials).
	ExternalID, LiveURL string
	// Operator names who decides, for a Dev caller only (default: the
	// caller's name, which is always the operator of any other caller).
	Operator string
}

// check validates the action and returns its operator.
func (a Action) check(c Caller) (string, error) {
	operator := c.Name
	if c.Dev && a.Operator != "" {
		if err := ValidateName(a.Operator); err != nil {
			return "", invalid("operator", err.Error())
		}
		operator = a.Operator
	}
	switch {
	case strings.TrimSpace(a.Reason) == "":
		return "", invalid("reason", "is required (it is recorded with the decision)")
	case len(a.Reason) > MaxReason:
		return "", invalid("reason", "is longer than 2000 bytes")
	case !utf8.ValidString(a.Reason):
		return "", invalid("reason", "is not valid UTF-8")
	}
	for _, r := range a.Reason {
		if unicode.IsControl(r) && r != '\n' && r != '\t' {
			return "", invalid("reason", "has a control character")
		}
	}
	switch a.Kind {
	case ActionResolveConfirmed:
		if a.ExternalID == "" {
			return "", invalid("external_id", "is required to resolve as confirmed (the external object found)")
		}
		if err := events.ValidateFreeform("external_id", a.ExternalID); err != nil {
			return "", invalid("external_id", FieldReason(err))
		}
		if a.LiveURL != "" {
			u, err := url.Parse(a.LiveURL)
			if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || u.User != nil || len(a.LiveURL) > 2048 {
				return "", invalid("live_url", "must be an http(s) URL without credentials")
			}
		}
	case ActionApprove, ActionResolveNotExecuted, ActionAbandon:
		if a.ExternalID != "" || a.LiveURL != "" {
			return "", invalid("external_id", "only a confirmed resolution names the external object")
		}
	default:
		return "", invalid("action", "is not "+strings.Join([]string{ActionApprove, ActionResolveConfirmed, ActionResolveNotExecuted, ActionAbandon}, ", "))
	}
	return operator, nil
}

// Act records an operator decision on the intent id, as it is read now
// (one read of the log), under the caller's name, and returns the intent
// it left (the appended event folded in). The action is checked before
// the log is read. Refused by the lifecycle, it is
// producer.ErrNotAllowed with the intent as it was read; an intent that
// moved meanwhile is ledger.ErrConflict.
func (s *Service) Act(ctx context.Context, c Caller, id string, a Action) (*ledger.History, *fsm.Intent, error) {
	if err := needScope(c, ScopeOperate); err != nil {
		return nil, nil, err
	}
	operator, err := a.check(c)
	if err != nil {
		return nil, nil, err
	}
	h, i, err := s.load(ctx, c, id, false)
	if err != nil {
		return nil, nil, err
	}
	// The append is not tied to the caller's context: a decision that
	// reached the log is reported by the next read, never half made.
	actx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
	defer cancel()
	p := s.cfg.Intents
	switch a.Kind {
	case ActionApprove:
		err = p.Approve(actx, h, i, operator, a.Reason)
	case ActionResolveConfirmed:
		err = p.ResolveConfirmed(actx, h, i, operator, a.Reason, a.ExternalID, a.LiveURL)
	case ActionResolveNotExecuted:
		err = p.ResolveReleased(actx, h, i, operator, a.Reason)
	default: // ActionAbandon (check allows no other)
		err = p.Abandon(actx, h, i, operator, a.Reason)
	}
	return h, i, err
}
