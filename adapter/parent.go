package adapter

// ParentChecker is optional: it checks an intent's parent (its
// ParentExternalID) against the shape the route declares (an issue
// number, a ticket key), before the intent is recorded. A parent that
// does not fit is an error naming the shape; nothing is recorded or
// written. Without it any parent is accepted.
type ParentChecker interface {
	CheckParent(parent string) error
}
