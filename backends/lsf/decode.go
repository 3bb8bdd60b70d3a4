package lsf

import (
	"bytes"
	"encoding/json"
	"encoding/xml"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"

	"github.com/bridge-runner/bridge-runner/backends/httpx"
)

// node is a decoded answer: Application Center's JSON is a mapping of its
// XML (attributes as "@name", one element as an object, several as an
// array), so both are decoded into the same generic shape: map[string]any,
// []any and string (json.Number for JSON numbers).
type node = map[string]any

// decodeDoc decodes a JSON or XML body. For XML the root element's content
// is returned (its name dropped), as the JSON mapping does.
func decodeDoc(body []byte) (node, error) {
	body = bytes.TrimSpace(body)
	if len(body) == 0 {
		return node{}, nil
	}
	if body[0] == '<' {
		doc, err := decodeXML(body)
		if err != nil {
			// The decoder's words quote the server's element names.
			return nil, fmt.Errorf("not well-formed XML (%s)", httpx.NotShown)
		}
		return doc, nil
	}
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return nil, fmt.Errorf("neither JSON nor XML (%s)", httpx.NotShown)
	}
	m, ok := v.(map[string]any)
	if !ok {
		return nil, fmt.Errorf("expected a JSON object, got %T", v)
	}
	return m, nil
}

func decodeXML(body []byte) (node, error) {
	dec := xml.NewDecoder(bytes.NewReader(body))
	dec.Strict = false // tolerate HTML entities and the like
	for {
		tok, err := dec.Token()
		if err != nil {
			if errors.Is(err, io.EOF) {
				return nil, errors.New("XML without a root element")
			}
			return nil, err
		}
		if se, ok := tok.(xml.StartElement); ok {
			v, err := xmlElement(dec, se)
			if err != nil {
				return nil, err
			}
			if m, ok := v.(node); ok {
				return m, nil
			}
			return node{"#text": v}, nil
		}
	}
}

// xmlElement reads the element started by se: text only gives a string,
// anything else a map (repeated children become arrays).
func xmlElement(dec *xml.Decoder, se xml.StartElement) (any, error) {
	m := node{}
	for _, a := range se.Attr {
		m["@"+a.Name.Local] = a.Value
	}
	var text strings.Builder
	children := false
	for {
		tok, err := dec.Token()
		if err != nil {
			return nil, err
		}
		switch t := tok.(type) {
		case xml.StartElement:
			children = true
			v, err := xmlElement(dec, t)
			if err != nil {
				return nil, err
			}
			name := t.Name.Local // atom:link is "link"
			switch old := m[name].(type) {
			case nil:
				m[name] = v
			case []any:
				m[name] = append(old, v)
			default:
				m[name] = []any{old, v}
			}
		case xml.CharData:
			text.Write(t)
		case xml.EndElement:
			s := text.String()
			if !children && len(m) == 0 {
				return s, nil
			}
			if ts := strings.TrimSpace(s); ts != "" {
				m["#text"] = ts
			}
			return m, nil
		}
	}
}

// get returns the first of names present in m, compared without case.
func get(m node, names ...string) any {
	if m == nil {
		return nil
	}
	for _, n := range names {
		if v, ok := m[n]; ok {
			return v
		}
	}
	for _, n := range names {
		for k, v := range m {
			if strings.EqualFold(k, n) {
				return v
			}
		}
	}
	return nil
}

// str renders a scalar as a string ("" for nil and containers other than
// a text-bearing element).
func str(v any) string {
	switch t := v.(type) {
	case nil:
		return ""
	case string:
		return strings.TrimSpace(t)
	case json.Number:
		return t.String()
	case float64:
		return strconv.FormatFloat(t, 'f', -1, 64)
	case bool:
		return strconv.FormatBool(t)
	case node:
		if s, ok := t["#text"]; ok {
			return str(s)
		}
		if s, ok := t["$"]; ok {
			return str(s)
		}
	}
	return ""
}

// list returns v as a list of objects: one object is a list of one.
func list(v any) []node {
	switch t := v.(type) {
	case node:
		return []node{t}
	case []any:
		var out []node
		for _, e := range t {
			if m, ok := e.(node); ok {
				out = append(out, m)
			}
		}
		return out
	}
	return nil
}

// errorMessage finds the message of an error answer in the documented
// shapes, <error><message> and {"message"} (and the variants
// {"error":{"message"}}, errMsg, errorMessage, note), as the server wrote
// it: httpx.Reason makes it fit for a message. Any other body gives "".
func errorMessage(body []byte) string {
	doc, err := decodeDoc(body)
	if err != nil {
		return ""
	}
	for _, m := range []node{doc, firstMap(get(doc, "error")), firstMap(get(doc, "errors"))} {
		if s := str(get(m, "message", "errMsg", "errorMessage", "note")); s != "" {
			return s
		}
	}
	if s := str(get(doc, "error")); s != "" {
		return s
	}
	return str(doc["#text"])
}

func firstMap(v any) node {
	if l := list(v); len(l) > 0 {
		return l[0]
	}
	return nil
}
