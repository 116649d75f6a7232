package httproute

import (
	"encoding/json"
	"strings"
)

// PayloadSchema is the route's payload section as a JSON Schema (draft
// 2020-12), for callers that describe the route to others: the MCP server
// gives it to agents as the input schema of the route's submit tool.
//
// NormalizePayload stays the authority. The schema never refuses a payload
// NormalizePayload accepts, and refuses the plain mistakes (a missing
// required field, an unknown field, a wrong type, a value outside an enum
// or a numeric bound); what JSON Schema cannot say exactly is loosened:
// byte lengths of strings become character lengths (max_length n bytes:
// at most n characters; min_length n bytes: at least ⌈n/4⌉ characters),
// non_empty strings need one non-space character. Without payload.fields
// it is the empty schema: any JSON value.
func (a *Adapter) PayloadSchema() json.RawMessage {
	var s map[string]any
	if a.schema == nil || a.schema.fields == nil {
		s = map[string]any{}
	} else {
		s = objectSchema(a.schema.fields)
	}
	b, err := json.Marshal(s)
	if err != nil { // only maps, strings, numbers and canonical JSON: cannot happen
		return json.RawMessage(`{}`)
	}
	return b
}

// WriteMethod is the HTTP method of the route's write (POST, PUT, PATCH or
// DELETE): POST creates, the others change or remove what exists.
func (a *Adapter) WriteMethod() string {
	if a.write == nil {
		return ""
	}
	return a.write.method
}

func objectSchema(fields []*fieldSpec) map[string]any {
	props := make(map[string]any, len(fields))
	required := []string{}
	for _, f := range fields {
		props[f.name] = fieldSchema(f)
		if f.required {
			required = append(required, f.name)
		}
	}
	return map[string]any{"type": "object", "properties": props, "required": required, "additionalProperties": false}
}

func fieldSchema(f *fieldSpec) map[string]any {
	s := map[string]any{}
	var notes []string
	switch f.typ {
	case typeAny:
	case typeSHA256:
		s["type"] = "string"
		s["pattern"] = "^[0-9a-f]{64}$"
		notes = append(notes, "sha256: 64 lowercase hex characters")
	case typeString:
		notes = stringSchema(f, s, notes)
	case typeInteger, typeNumber:
		s["type"] = f.typ
		if f.min != nil {
			s["minimum"] = *f.min
		}
		if f.max != nil {
			s["maximum"] = *f.max
		}
	case typeBoolean:
		s["type"] = "boolean"
	case typeArray:
		s["type"] = "array"
		if f.items != nil {
			s["items"] = fieldSchema(f.items)
		}
		minItems := f.minLen
		if f.nonEmpty && minItems < 1 {
			minItems = 1
		}
		if minItems > 0 {
			s["minItems"] = minItems
		}
		if f.maxLen >= 0 {
			s["maxItems"] = f.maxLen
		}
	case typeObject:
		if f.fields != nil {
			s = objectSchema(f.fields)
		} else {
			s["type"] = "object"
		}
		if f.nonEmpty {
			s["minProperties"] = 1
		}
	}
	if f.omitEmpty && f.typ != typeAny {
		// NormalizePayload leaves "", [] and {} out before it checks the
		// type, so they are accepted whatever the field's type.
		s = map[string]any{"anyOf": []any{s, map[string]any{"enum": []any{"", []any{}, map[string]any{}}}}}
		notes = append(notes, `"", [] and {} are left out`)
	}
	if f.def != nil {
		s["default"] = json.RawMessage(f.def)
	}
	if len(notes) > 0 {
		s["description"] = strings.Join(notes, "; ")
	}
	return s
}

// stringSchema fills s with a string field's constraints and returns
// notes with what JSON Schema cannot say of them.
func stringSchema(f *fieldSpec, s map[string]any, notes []string) []string {
	s["type"] = "string"
	if f.pattern != nil {
		s["pattern"] = f.pattern.String()
	}
	if f.nonEmpty {
		if f.pattern == nil {
			s["pattern"] = `\S`
		} else {
			s["allOf"] = []any{map[string]any{"pattern": `\S`}}
		}
		notes = append(notes, "not blank")
	}
	if f.minLen > 0 {
		s["minLength"] = (f.minLen + 3) / 4
		notes = append(notes, "at least "+itoa(f.minLen)+" bytes")
	}
	if f.maxLen >= 0 {
		s["maxLength"] = f.maxLen
		notes = append(notes, "at most "+itoa(f.maxLen)+" bytes")
	}
	if len(f.enum) > 0 {
		s["enum"] = f.enum
	}
	return notes
}

func itoa(n int) string {
	b, _ := json.Marshal(n)
	return string(b)
}
