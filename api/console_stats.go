package api

import (
	"net/http"
	"time"

	"github.com/settle-dev/settle/events"
	"github.com/settle-dev/settle/service"
)

// --- GET /v1/stats ---

// statsParams are the query parameters of GET /v1/stats.
var statsParams = []string{"route", "account", "window"}

// MaxStatsWindow bounds ?window= of GET /v1/stats.
const MaxStatsWindow = 24 * time.Hour

// handleStats answers the console's charts: per route, the intents created
// in the window (default the last hour) by their state now, in twelve
// slots, and how long unknown outcomes took to settle (fsm.Settled).
func (s *Server) handleStats(w http.ResponseWriter, r *http.Request, c *service.Caller) error {
	q := r.URL.Query() // checked by checkQuery: known parameters, each once
	var route, account string
	window := service.FlowWindow
	if v, ok := q["route"]; ok {
		if err := events.ValidateToken("route", v[0]); err != nil {
			return fieldProblem(err)
		}
		route = v[0]
	}
	if v, ok := q["account"]; ok {
		if err := events.ValidateFreeform("account", v[0]); err != nil {
			return fieldProblem(err)
		}
		account = v[0]
	}
	if v, ok := q["window"]; ok {
		d, err := time.ParseDuration(v[0])
		if err != nil || d < time.Minute || d > MaxStatsWindow || d%time.Minute != 0 {
			return invalid("window", "window: must be a duration in whole minutes from 1m to 24h, like 1h or 15m")
		}
		window = d
	}
	flow, err := s.cfg.Service.Flow(r.Context(), *c, route, account, window)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, flow)
	return nil
}
