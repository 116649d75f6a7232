package httproute_test

import (
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/google/jsonschema-go/jsonschema"

	"github.com/settle-dev/settle/adapter/httproute"
)

// allTypes declares a field of every type and every constraint.
const allTypes = `routes:
  - name: all_types
    base_url: http://127.0.0.1:9
    write: {method: PATCH, url: "{{base}}/x", response: {external_id: $.id}}
    policy: {trust_response: true, retry: never}
    payload:
      fields:
        s: {type: string, required: true, non_empty: true, min_length: 3, max_length: 8}
        p: {type: string, pattern: "^[a-z]+$", non_empty: true}
        e: {type: string, enum: [red, green]}
        h: {type: sha256}
        i: {type: integer, minimum: 1, maximum: 9}
        n: {type: number, minimum: -1.5}
        b: {type: boolean, default: false}
        a: {type: array, items: {type: integer}, min_length: 1, max_length: 3}
        ne: {type: array, non_empty: true, omit_empty: true}
        o: {type: object, fields: {x: {type: string, required: true}, y: integer}}
        oo: {type: object, non_empty: true}
        any: {type: any}
        oe: {type: integer, omit_empty: true}
`

func resolvedSchema(t testing.TB, a *httproute.Adapter) *jsonschema.Resolved {
	t.Helper()
	var s jsonschema.Schema
	if err := json.Unmarshal(a.PayloadSchema(), &s); err != nil {
		t.Fatalf("schema %s: %v", a.PayloadSchema(), err)
	}
	r, err := s.Resolve(nil)
	if err != nil {
		t.Fatalf("resolve %s: %v", a.PayloadSchema(), err)
	}
	return r
}

func schemaAccepts(r *jsonschema.Resolved, raw []byte) (bool, error) {
	var v any
	if err := json.Unmarshal(raw, &v); err != nil {
		return false, err
	}
	return r.Validate(v) == nil, nil
}

// TestPayloadSchemaNeverRefusesWhatSettleAccepts: an agent host that
// validates a tool call against the schema never blocks a payload the
// route accepts (corpus and 20,000 random payloads per route), and the
// schema refuses the plain mistakes the route refuses.
func TestPayloadSchemaNeverRefusesWhatSettleAccepts(t *testing.T) {
	adapters := map[string]*httproute.Adapter{"all_types": buildYAML(t, []byte(allTypes), nil)}
	for file := range payloadCorpus {
		adapters[file] = loadExample(t, file, "http://127.0.0.1:9")
	}
	rng := rand.New(rand.NewPCG(15, 15))
	for name, a := range adapters {
		r := resolvedSchema(t, a)
		var fields map[string]json.RawMessage
		var top map[string]any
		_ = json.Unmarshal(a.PayloadSchema(), &top)
		props, _ := json.Marshal(top["properties"])
		_ = json.Unmarshal(props, &fields)
		names := []string{"extra"}
		for k := range fields {
			names = append(names, k)
		}
		inputs := [][]byte{}
		var bases []map[string]any
		for _, c := range append(payloadCorpus[name], `{"s":"abcd"}`) {
			inputs = append(inputs, []byte(c))
			var m map[string]any
			if _, err := a.NormalizePayload([]byte(c)); err == nil && json.Unmarshal([]byte(c), &m) == nil {
				bases = append(bases, m)
			}
		}
		for k := 0; k < 20000; k++ {
			inputs = append(inputs, randomPayload(rng, names, bases))
		}
		accepted := 0
		for _, raw := range inputs {
			if !json.Valid(raw) {
				continue
			}
			if _, err := a.NormalizePayload(raw); err != nil {
				continue
			}
			accepted++
			ok, err := schemaAccepts(r, raw)
			if err != nil || !ok {
				t.Fatalf("%s: settle accepts %s but the schema refuses it (%v)\nschema: %s", name, raw, err, a.PayloadSchema())
			}
		}
		if accepted < 20 {
			t.Fatalf("%s: only %d accepted payloads: the generator does not reach the schema", name, accepted)
		}
	}

	all := adapters["all_types"]
	r := resolvedSchema(t, all)
	good := `{"s":"abcd","o":{"x":"1"}}`
	if _, err := all.NormalizePayload([]byte(good)); err != nil {
		t.Fatal(err)
	}
	for _, bad := range []string{
		`{"o":{"x":"1"}}`,                    // s missing
		`{"s":"abcd","o":{"x":"1"},"z":1}`,   // unknown field
		`{"s":4,"o":{"x":"1"}}`,              // wrong type
		`{"s":"  ","o":{"x":"1"}}`,           // blank
		`{"s":"abcd","o":{}}`,                // nested required
		`{"s":"abcd","e":"blue"}`,            // enum
		`{"s":"abcd","i":10}`,                // maximum
		`{"s":"abcd","i":1.5}`,               // integer
		`{"s":"abcd","h":"ABC"}`,             // sha256
		`{"s":"abcd","a":[]}`,                // min items
		`{"s":"abcd","a":[1,2,3,4]}`,         // max items
		`{"s":"abcdefghi"}`,                  // max length
		`{"s":"abcd","p":"A"}`,               // pattern
		`{"s":"abcd","oo":{}}`,               // non-empty object
		`{"s":"abcd","b":"yes"}`,             // boolean
		`{"s":"abcd","n":-2}`,                // minimum
		`{"s":"abcd","o":{"x":"1","q":1}}`,   // nested unknown
		`{"s":"abcd","a":["1"]}`,             // item type
		`{"s":"abcd","oe":"x"}`,              // omit_empty keeps the type for non-empty values
		`["s"]`,                              // not an object
		`{"s":"abcd","o":{"x":"1","y":"2"}}`, // nested type
	} {
		if _, err := all.NormalizePayload([]byte(bad)); err == nil {
			t.Fatalf("settle accepts %s", bad)
		}
		if ok, _ := schemaAccepts(r, []byte(bad)); ok {
			t.Errorf("the schema accepts %s, which settle refuses", bad)
		}
	}
	if got := all.WriteMethod(); got != "PATCH" {
		t.Fatalf("WriteMethod = %q", got)
	}
}

// TestPayloadSchemaWithoutFieldsIsAnyValue: a route without payload.fields
// accepts any JSON value, and so does its schema.
func TestPayloadSchemaWithoutFieldsIsAnyValue(t *testing.T) {
	a := buildYAML(t, []byte(`routes:
  - name: free
    base_url: http://127.0.0.1:9
    write: {method: POST, url: "{{base}}/x", response: {external_id: $.id}}
    policy: {trust_response: true, retry: never}
`), nil)
	if got := string(a.PayloadSchema()); got != `{}` {
		t.Fatalf("schema %s", got)
	}
	if a.WriteMethod() != "POST" {
		t.Fatalf("WriteMethod = %q", a.WriteMethod())
	}
}

// randomPayload changes 0..3 fields of a valid payload (or builds one
// from nothing) with random values of every JSON type.
func randomPayload(rng *rand.Rand, names []string, bases []map[string]any) []byte {
	m := map[string]any{}
	n := rng.IntN(len(names) + 1)
	if len(bases) > 0 && rng.IntN(4) > 0 {
		for k, v := range bases[rng.IntN(len(bases))] {
			m[k] = v
		}
		n = rng.IntN(4)
	}
	for k := n; k > 0; k-- {
		m[names[rng.IntN(len(names))]] = randomValue(rng, 0)
	}
	b, _ := json.Marshal(m)
	return b
}

func randomValue(rng *rand.Rand, depth int) any {
	switch rng.IntN(12) {
	case 0:
		return nil
	case 1:
		return rng.IntN(2) == 0
	case 2:
		return rng.IntN(21) - 5
	case 3:
		return float64(rng.IntN(40)-10) / 4
	case 4:
		return ""
	case 5:
		return strings.Repeat(" ", rng.IntN(3))
	case 6:
		return []string{"red", "green", "blue", "abc", "abcd", "abcdefgh", "abcdefghi", "é€😀x", "ABC", "€", "é€"}[rng.IntN(11)]
	case 7:
		return fmt.Sprintf("%064x", rng.Uint64())
	case 8, 9:
		if depth > 2 {
			return "x"
		}
		a := []any{}
		for k := rng.IntN(5); k > 0; k-- {
			a = append(a, randomValue(rng, depth+1))
		}
		return a
	default:
		if depth > 2 {
			return 1
		}
		m := map[string]any{}
		for k := rng.IntN(3); k > 0; k-- {
			m[[]string{"x", "y", "q"}[rng.IntN(3)]] = randomValue(rng, depth+1)
		}
		return m
	}
}

// payloadCorpus holds, per example file, payloads the route accepts and
// payloads it refuses.
var payloadCorpus = map[string][]string{
	"social.yaml": {
		`{"body":"hi"}`, `{"body":"hi","assets":[]}`, `{"assets":["` + asset1 + `"],"body":"x"}`,
		`{"body":""}`, `{"body":"  "}`, `{"body":null}`, `{"body":1}`, `{}`, `[]`, `"x"`, ``, `{"body":"x","extra":1}`,
		`{"body":"x","Bad Key":1}`, `{"body":"x","assets":null}`, `{"body":"x","assets":"a"}`, `{"body":"x","assets":[1]}`,
		`{"body":"x","assets":["ABC"]}`, `{"body":"x","assets":["` + asset1 + `",2]}`, `{"body":"x","body":"y"}`,
		`{"body":"e\u0301"}`, `{"body":"x"} trailing`, `{"body":"x","n":1e400}`, `{"body":"\ud800"}`,
	},
	"booking.yaml": {
		`{"booking_id":"B-1","expected_version":1,"change":{"seat":"1A"}}`, `{"booking_id":"B.1:x_y-z","expected_version":0,"change":{"a":null}}`,
		`{"booking_id":"","expected_version":1,"change":{"a":1}}`, `{"booking_id":".","expected_version":1,"change":{"a":1}}`,
		`{"booking_id":"..","expected_version":1,"change":{"a":1}}`, `{"booking_id":"...","expected_version":1,"change":{"a":1}}`,
		`{"booking_id":"a b","expected_version":1,"change":{"a":1}}`, `{"booking_id":"` + strings.Repeat("b", 129) + `","expected_version":1,"change":{"a":1}}`,
		`{"booking_id":"` + strings.Repeat("b", 128) + `","expected_version":1,"change":{"a":1}}`,
		`{"booking_id":"B","expected_version":-1,"change":{"a":1}}`, `{"booking_id":"B","expected_version":1.5,"change":{"a":1}}`,
		`{"booking_id":"B","expected_version":"1","change":{"a":1}}`, `{"booking_id":"B","change":{"a":1}}`,
		`{"booking_id":"B","expected_version":1}`, `{"booking_id":"B","expected_version":1,"change":{}}`,
		`{"booking_id":"B","expected_version":1,"change":[1]}`, `{"booking_id":"B","expected_version":1,"change":null}`,
		`{"booking_id":1,"expected_version":1,"change":{"a":1}}`, `{"booking_id":"B","expected_version":1,"change":{"a":1},"x":0}`,
		`{"booking_id":"B","expected_version":1e2,"change":{"b":{"z":1,"a":[2,1]}}}`,
	},
	"payment.yaml": {
		`{"amount":100,"currency":"jpy","customer":"cus_1"}`, `{"amount":100,"currency":"jpy","customer":"cus_1","description":""}`,
		`{"amount":100,"currency":"jpy","customer":"cus_1","description":"d"}`, `{"amount":0,"currency":"jpy","customer":"c"}`,
		`{"amount":-1,"currency":"jpy","customer":"c"}`, `{"amount":1.5,"currency":"jpy","customer":"c"}`, `{"amount":"1","currency":"jpy","customer":"c"}`,
		`{"currency":"jpy","customer":"c"}`, `{"amount":1,"currency":"JPY","customer":"c"}`, `{"amount":1,"currency":"yen!","customer":"c"}`,
		`{"amount":1,"customer":"c"}`, `{"amount":1,"currency":"jpy"}`, `{"amount":1,"currency":"jpy","customer":""}`,
		`{"amount":1,"currency":"jpy","customer":"  "}`, `{"amount":1,"currency":"jpy","customer":"a\u0001b"}`,
		`{"amount":1,"currency":"jpy","customer":"` + strings.Repeat("c", 256) + `"}`, `{"amount":1,"currency":"jpy","customer":"c","description":null}`,
		`{"amount":1,"currency":"jpy","customer":"c","description":"` + strings.Repeat("d", 1001) + `"}`, `{"amount":1,"currency":"jpy","customer":"c","metadata":{}}`,
		`{"amount":1,"currency":null,"customer":"c"}`,
	},
}
