package projector

// The list's search filters: a request id, and a search term that matches
// an intent id or a request id exactly (the console's search box).

// searchConds adds the SQL conditions of f's request id and search term
// to w.
func (f Filter) searchConds(w *sqlConds) {
	w.eq("i.request_id", f.RequestID)
	if f.Search != "" {
		w.add("(i.intent_id = ? OR i.request_id = ?)", f.Search, f.Search)
	}
}

// Matches reports whether v passes f's filters, the cursor and the limit
// aside: what List selects, for a reader that holds views of its own.
func (f Filter) Matches(v IntentView) bool {
	switch {
	case f.Tenant != "" && v.Tenant != f.Tenant,
		f.State != "" && v.State != f.State,
		f.Route != "" && v.Route != f.Route,
		f.Account != "" && v.Account != f.Account,
		f.RequestID != "" && v.RequestID != f.RequestID,
		f.Search != "" && v.IntentID != f.Search && v.RequestID != f.Search,
		!f.From.IsZero() && v.CreatedAt.Before(f.From),
		!f.To.IsZero() && !v.CreatedAt.Before(f.To):
		return false
	}
	return true
}
