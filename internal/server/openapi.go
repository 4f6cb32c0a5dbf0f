package server

import (
	"encoding/json"
	"fmt"
	"reflect"
	"strings"
	"time"

	"github.com/arbiterhq/arbiter/internal/api"
)

// routeDoc describes one route for the OpenAPI document.
type routeDoc struct {
	summary string
	req     any // body type, nil for none
	resp    any // answer type, nil for 204
	status  int
	query   []string
}

// pageQuery are the paging parameters of every list (paging.go).
var pageQuery = []string{"limit", "continue"}

// buildOpenAPI writes the OpenAPI 3.1 document of the routes.
func buildOpenAPI(routes []apiRoute) ([]byte, error) {
	schemas := map[string]any{}
	paths := map[string]map[string]any{}
	errResp := map[string]any{"description": "error", "content": map[string]any{"application/json": map[string]any{"schema": schemaOf(reflect.TypeOf(api.Error{}), schemas)}}}
	for _, rt := range routes {
		d := rt.doc
		if d.summary == "" {
			return nil, fmt.Errorf("server: route %s has no OpenAPI description", rt.pattern)
		}
		method, path, _ := strings.Cut(rt.pattern, " ")
		op := map[string]any{"summary": d.summary, "security": []any{map[string]any{"bearer": []string{}}}}
		var params []any
		for _, seg := range strings.Split(path, "/") {
			if strings.HasPrefix(seg, "{") {
				params = append(params, map[string]any{"name": strings.Trim(seg, "{}"), "in": "path", "required": true, "schema": map[string]any{"type": "string"}})
			}
		}
		for _, q := range d.query {
			params = append(params, map[string]any{"name": q, "in": "query", "schema": map[string]any{"type": "string"}})
		}
		if params != nil {
			op["parameters"] = params
		}
		if d.req != nil {
			op["requestBody"] = map[string]any{"required": true, "content": map[string]any{"application/json": map[string]any{"schema": schemaOf(reflect.TypeOf(d.req), schemas)}}}
		}
		responses := map[string]any{"default": errResp}
		switch {
		case d.resp == nil:
			responses["204"] = map[string]any{"description": "done"}
		default:
			st := d.status
			if st == 0 {
				st = 200
			}
			responses[fmt.Sprint(st)] = map[string]any{"description": "ok", "content": map[string]any{"application/json": map[string]any{"schema": schemaOf(reflect.TypeOf(d.resp), schemas)}}}
		}
		op["description"] = rt.auth.description()
		op["x-arbiter-access"] = rt.auth.String()
		op["responses"] = responses
		if paths[path] == nil {
			paths[path] = map[string]any{}
		}
		paths[path][strings.ToLower(method)] = op
	}
	doc := map[string]any{
		"openapi": "3.1.0",
		"info": map[string]any{"title": "Arbiter control plane API", "version": "v1",
			"description": "GPU capacity arbiter. Every request carries Authorization: Bearer <token>. Errors are {code, message, field}. Another tenant's objects answer 404."},
		"paths": paths,
		"components": map[string]any{
			"schemas":         schemas,
			"securitySchemes": map[string]any{"bearer": map[string]any{"type": "http", "scheme": "bearer"}},
		},
	}
	return json.MarshalIndent(doc, "", "  ")
}

var (
	timeType     = reflect.TypeOf(time.Time{})
	gpusType     = reflect.TypeOf(api.GPUs(0))
	durationType = reflect.TypeOf(api.Duration(0))
	rawType      = reflect.TypeOf(json.RawMessage(nil))
)

// schemaOf returns a JSON schema for t; named structs go to schemas.
func schemaOf(t reflect.Type, schemas map[string]any) map[string]any {
	switch t {
	case timeType:
		return map[string]any{"type": "string", "format": "date-time"}
	case gpusType:
		return map[string]any{"description": "GPUs: a number (8, 0.5) or a string (\"8\", \"0.5\", \"500m\")", "oneOf": []any{map[string]any{"type": "number"}, map[string]any{"type": "string"}}}
	case durationType:
		return map[string]any{"type": "string", "description": "duration such as 90s, 5m, 2h or 7d"}
	case rawType: // JSON passed through (Why.Blockers: an array of objects)
		return map[string]any{"type": "array", "items": map[string]any{"type": "object"}}
	}
	switch t.Kind() {
	case reflect.Pointer:
		return schemaOf(t.Elem(), schemas)
	case reflect.String:
		return map[string]any{"type": "string"}
	case reflect.Bool:
		return map[string]any{"type": "boolean"}
	case reflect.Int, reflect.Int64, reflect.Int32:
		return map[string]any{"type": "integer"}
	case reflect.Float64, reflect.Float32:
		return map[string]any{"type": "number"}
	case reflect.Slice:
		return map[string]any{"type": "array", "items": schemaOf(t.Elem(), schemas)}
	case reflect.Map:
		return map[string]any{"type": "object", "additionalProperties": schemaOf(t.Elem(), schemas)}
	case reflect.Struct:
		name := t.Name()
		if i := strings.Index(name, "["); i >= 0 { // List[api.Region] → RegionList
			name = name[i+1 : len(name)-1]
			name = name[strings.LastIndex(name, ".")+1:] + "List"
		}
		ref := map[string]any{"$ref": "#/components/schemas/" + name}
		if _, ok := schemas[name]; ok {
			return ref
		}
		schemas[name] = map[string]any{} // placeholder against recursion
		props := map[string]any{}
		var required []string
		var addFields func(t reflect.Type)
		addFields = func(t reflect.Type) {
			for i := 0; i < t.NumField(); i++ {
				f := t.Field(i)
				if f.Anonymous {
					addFields(f.Type)
					continue
				}
				tag := f.Tag.Get("json")
				if tag == "-" || !f.IsExported() {
					continue
				}
				jn, opts, _ := strings.Cut(tag, ",")
				if jn == "" {
					jn = f.Name
				}
				props[jn] = schemaOf(f.Type, schemas)
				if !strings.Contains(opts, "omit") && f.Type.Kind() != reflect.Pointer {
					required = append(required, jn)
				}
			}
		}
		addFields(t)
		s := map[string]any{"type": "object", "properties": props, "additionalProperties": false}
		if len(required) > 0 {
			s["required"] = required
		}
		schemas[name] = s
		return ref
	}
	return map[string]any{}
}
