// Package manifest reads LoadBalancerPolicy documents from YAML or JSON: files, directories and streams of
// several documents separated by "---". Decoding is strict: an unknown or misspelled field is an error, never
// silently dropped.
package manifest

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"unicode/utf8"

	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	kjson "sigs.k8s.io/json"
	"sigs.k8s.io/yaml"

	"github.com/lbplane/lbplane/api/v1alpha1"
)

// MaxDocumentBytes bounds one document: a policy is a few KiB; anything near this is a mistake or an attack.
const MaxDocumentBytes = 1 << 20

// MaxDocuments bounds the documents of one stream (a push, a diff, a dry run, a config-dir file, lbctl's
// -f), empty ones included: Decode stops reading at the next one. Without it 2,000,000 empty documents fit in
// a push's 8 MiB and were each decoded, validated and answered with an error (2.5 GB of RSS for one
// request, with the read-only token). A manifest of this many policies is split into several pushes or files.
const MaxDocuments = 10000

// ErrTooManyDocuments is Decode's error for a stream of more than MaxDocuments documents.
var ErrTooManyDocuments = fmt.Errorf("more than %d documents (empty ones included); split it into several", MaxDocuments)

// Document is one decoded policy and where it came from.
type Document struct {
	Source string // "file.yaml#2": file name and document index (from 1)
	Policy *v1alpha1.LoadBalancerPolicy
	// Raw is the document as JSON, byte for byte what was decoded.
	Raw []byte
}

// DecodeError is a document that could not be decoded.
type DecodeError struct {
	Source string
	Err    error
	// Declared says the document's apiVersion and kind name a LoadBalancerPolicy. When false, the document is
	// something else (or not YAML at all), and callers that log errors should not echo field names from it:
	// they are content of a file that was never meant to be a policy.
	Declared bool
}

func (e *DecodeError) Error() string { return e.Source + ": " + e.Err.Error() }
func (e *DecodeError) Unwrap() error { return e.Err }

// Decode reads every document in r. It returns all documents it could decode and every error, joined. A
// stream of more than MaxDocuments documents stops at the next one, with ErrTooManyDocuments alone (and no
// documents): the rest is never read.
func Decode(source string, r io.Reader) ([]Document, error) { return decode(source, r, nil) }

// Other takes the documents of other kinds than LoadBalancerPolicy, for a reader of more kinds (lbctl's
// offline Gateway API objects): it says whether it took the document (by its apiVersion and kind), and what
// is wrong with it. A document it does not take is decoded as a policy.
type Other func(source, apiVersion, kind string, doc []byte) (bool, error)

// decode is Decode, handing other (when not nil) the documents it takes.
func decode(source string, r io.Reader, other Other) ([]Document, error) {
	reader := utilyaml.NewYAMLReader(bufio.NewReaderSize(r, 64<<10))
	var docs []Document
	var errs []error
	read := 0
	for i := 1; ; i++ {
		chunk, err := reader.Read()
		if errors.Is(err, io.EOF) {
			break
		}
		src := fmt.Sprintf("%s#%d", source, i)
		if err != nil {
			errs = append(errs, &DecodeError{Source: src, Err: err})
			break
		}
		if read++; read > MaxDocuments {
			return nil, &DecodeError{Source: source, Err: ErrTooManyDocuments, Declared: true}
		}
		if len(bytes.TrimSpace(stripComments(chunk))) == 0 {
			i--
			continue
		}
		if other != nil {
			if took, err := takeOther(other, src, chunk); took {
				if err != nil {
					errs = append(errs, &DecodeError{Source: src, Err: err, Declared: true})
				}
				continue
			}
		}
		doc, err := DecodeDocument(chunk)
		if err != nil {
			// One error per problem, so that each is listed on its own (lbctl's lines, the push API's errors).
			declared := declaresPolicy(chunk)
			for _, e := range problems(err) {
				errs = append(errs, &DecodeError{Source: src, Err: e, Declared: declared})
			}
			continue
		}
		doc.Source = src
		docs = append(docs, doc)
	}
	return docs, errors.Join(errs...)
}

// DecodeBytes is Decode of data held in memory (a push's body, a config-dir file): the document markers are
// counted first, without decoding or copying anything, so that a stream over MaxDocuments is refused before
// any document of it is decoded.
func DecodeBytes(source string, data []byte) ([]Document, error) {
	markers := 0
	for rest := data; len(rest) > 0; {
		line := rest
		if i := bytes.IndexByte(rest, '\n'); i >= 0 {
			line, rest = rest[:i], rest[i+1:]
		} else {
			rest = nil
		}
		if bytes.HasPrefix(line, []byte("---")) {
			if markers++; markers > MaxDocuments {
				return nil, &DecodeError{Source: source, Err: ErrTooManyDocuments, Declared: true}
			}
		}
	}
	return Decode(source, bytes.NewReader(data))
}

// DecodeDocument decodes exactly one YAML or JSON document.
func DecodeDocument(b []byte) (Document, error) {
	if len(b) > MaxDocumentBytes {
		return Document{}, fmt.Errorf("document is %d bytes; at most %d allowed", len(b), MaxDocumentBytes)
	}
	if !utf8.Valid(b) {
		return Document{}, errors.New("document is not valid UTF-8")
	}
	j, err := yaml.YAMLToJSON(b)
	if err != nil {
		return Document{}, fmt.Errorf("not valid YAML: %w", err)
	}
	// sigs.k8s.io/json reports every unknown field with its full path ("spec.routes[0].backend"), but only
	// when the document otherwise decodes: a type error wins, and it names only the first one, without list
	// indices. typeErrors then walks the document to name every type error where it is. The generic decode
	// it walks is made only then: for a good document it would be a second full decode (8 % of the config
	// dir's decoding in the 10,000-policy cold start's profile).
	p := &v1alpha1.LoadBalancerPolicy{}
	strict, err := kjson.UnmarshalStrict(j, p, kjson.DisallowUnknownFields)
	if err != nil {
		var generic any
		if err := json.Unmarshal(j, &generic); err != nil {
			return Document{}, describe(err)
		}
		var unknown []string
		if bad := typeErrors(generic, reflect.TypeOf(v1alpha1.LoadBalancerPolicy{}), "", &unknown); len(bad) > 0 {
			// Every problem at once: the unknown fields beside the type errors.
			var errs []error
			for _, b := range bad {
				errs = append(errs, errors.New(b))
			}
			if len(unknown) > 0 {
				errs = append(errs, errors.New(unknownFields(unknown)))
			}
			return Document{}, errors.Join(errs...)
		}
		// Anything typeErrors does not know (a number out of range): encoding/json's typed error names it.
		if err := json.Unmarshal(j, &v1alpha1.LoadBalancerPolicy{}); err != nil {
			return Document{}, describe(err)
		}
		return Document{}, errors.New(strings.TrimPrefix(err.Error(), "json: "))
	}
	if len(strict) > 0 {
		// The rest of the document decoded: its field errors are reported with the unknown fields, so that one
		// typo does not hide every other problem of the file.
		errs := []error{unknownFieldError(strict)}
		if p.Kind == "" || p.Kind == v1alpha1.Kind {
			c := p.DeepCopy()
			v1alpha1.Default(c)
			for _, fe := range v1alpha1.Validate(c) {
				errs = append(errs, fe)
			}
		}
		return Document{}, errors.Join(errs...)
	}
	if p.Kind != "" && p.Kind != v1alpha1.Kind {
		return Document{}, fmt.Errorf("kind: must be %q, got %q", v1alpha1.Kind, p.Kind)
	}
	ShareStrings(p)
	return Document{Policy: p, Raw: j}, nil
}

// declaresPolicy reports whether a document says it is a LoadBalancerPolicy (apiVersion lbplane.io/...,
// kind LoadBalancerPolicy), whatever else is wrong with it.
func declaresPolicy(b []byte) bool {
	var head struct {
		APIVersion string `json:"apiVersion"`
		Kind       string `json:"kind"`
	}
	if len(b) > MaxDocumentBytes || yaml.Unmarshal(b, &head) != nil {
		return false
	}
	return strings.HasPrefix(head.APIVersion, v1alpha1.Group+"/") && head.Kind == v1alpha1.Kind
}

// unknownFieldError lists every unknown field, sorted so that the message does not depend on key order.
func unknownFieldError(strict []error) error {
	paths := make([]string, 0, len(strict))
	for _, e := range strict {
		if fe, ok := e.(kjson.FieldError); ok {
			paths = append(paths, strconv.Quote(fe.FieldPath()))
			continue
		}
		return errors.New(strings.TrimPrefix(e.Error(), "json: "))
	}
	slices.Sort(paths)
	return fmt.Errorf("unknown field %s", strings.Join(paths, ", "))
}

// unknownFields renders quoted paths of unknown fields as unknownFieldError does.
func unknownFields(paths []string) string {
	quoted := make([]string, len(paths))
	for i, p := range paths {
		quoted[i] = strconv.Quote(p)
	}
	slices.Sort(quoted)
	return "unknown field " + strings.Join(quoted, ", ")
}

// problems splits what DecodeDocument returned into its problems.
func problems(err error) []error {
	if j, ok := err.(interface{ Unwrap() []error }); ok {
		return j.Unwrap()
	}
	return []error{err}
}

var unmarshalerType = reflect.TypeOf((*json.Unmarshaler)(nil)).Elem()

// describe turns encoding/json errors into "field: reason" form.
func describe(err error) error {
	var te *json.UnmarshalTypeError
	if errors.As(err, &te) {
		return fmt.Errorf("%s: must be %s, got %s", te.Field, jsonKind(te.Type.Kind().String()), te.Value)
	}
	msg := err.Error()
	if f, ok := strings.CutPrefix(msg, "json: unknown field "); ok {
		return fmt.Errorf("unknown field %s", f)
	}
	return errors.New(strings.TrimPrefix(msg, "json: "))
}

func jsonKind(k string) string {
	switch {
	case strings.HasPrefix(k, "int"), strings.HasPrefix(k, "uint"):
		return "an integer"
	case k == "string":
		return "a string"
	case k == "bool":
		return "true or false"
	case k == "slice":
		return "a list"
	case k == "struct", k == "map":
		return "an object"
	}
	return k
}

// stripComments drops the lines of a chunk that are comments, blank, or document markers: the reader hands
// a separator that follows another ("---" lines back to back) over as a chunk of its own, which is an empty
// document, not a policy with every field missing.
func stripComments(b []byte) []byte {
	var out [][]byte
	for _, line := range bytes.Split(b, []byte("\n")) {
		if t := bytes.TrimSpace(line); len(t) > 0 && t[0] != '#' && !isMarker(t) {
			out = append(out, line)
		}
	}
	return bytes.Join(out, []byte("\n"))
}

// isMarker tells a YAML document marker line ("---" or "...", perhaps followed by a comment).
func isMarker(line []byte) bool {
	for _, m := range [][]byte{[]byte("---"), []byte("...")} {
		if rest, ok := bytes.CutPrefix(line, m); ok {
			rest = bytes.TrimSpace(rest)
			return len(rest) == 0 || rest[0] == '#'
		}
	}
	return false
}

// takeOther offers a document that declares a kind other than LoadBalancerPolicy to other.
func takeOther(other Other, source string, chunk []byte) (bool, error) {
	var head struct {
		APIVersion string `json:"apiVersion"`
		Kind       string `json:"kind"`
	}
	if len(chunk) > MaxDocumentBytes || yaml.Unmarshal(chunk, &head) != nil || head.Kind == "" || head.Kind == v1alpha1.Kind {
		return false, nil
	}
	return other(source, head.APIVersion, head.Kind, chunk)
}

// ReadPath reads a file, every *.yaml, *.yml and *.json file of a directory (not recursive, sorted by
// name), or standard input for "-".
func ReadPath(path string, stdin io.Reader) ([]Document, error) {
	return ReadPathWith(path, stdin, nil)
}

// ReadPathWith is ReadPath, handing other (when not nil) the documents of other kinds it takes.
func ReadPathWith(path string, stdin io.Reader, other Other) ([]Document, error) {
	if path == "-" {
		return decode("<stdin>", stdin, other)
	}
	info, err := os.Stat(path)
	if err != nil {
		return nil, err
	}
	files := []string{path}
	if info.IsDir() {
		files, err = PolicyFiles(path)
		if err != nil {
			return nil, err
		}
	}
	var docs []Document
	var errs []error
	for _, f := range files {
		fh, err := os.Open(f)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		d, err := decode(f, fh, other)
		fh.Close()
		docs = append(docs, d...)
		if err != nil {
			errs = append(errs, err)
		}
	}
	return docs, errors.Join(errs...)
}

// PolicyFileExtensions are the extensions of the files PolicyFiles lists (any case).
var PolicyFileExtensions = []string{".yaml", ".yml", ".json"}

// PolicyFilePatterns names them for a help text: "*.yaml, *.yml and *.json".
func PolicyFilePatterns() string {
	var p []string
	for _, e := range PolicyFileExtensions {
		p = append(p, "*"+e)
	}
	return strings.Join(p[:len(p)-1], ", ") + " and " + p[len(p)-1]
}

// PolicyFiles lists the policy files of a directory (PolicyFileExtensions, not hidden), sorted.
func PolicyFiles(dir string) ([]string, error) {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil, err
	}
	var files []string
	for _, e := range entries {
		ext := strings.ToLower(filepath.Ext(e.Name()))
		if !e.IsDir() && !strings.HasPrefix(e.Name(), ".") && slices.Contains(PolicyFileExtensions, ext) {
			files = append(files, filepath.Join(dir, e.Name()))
		}
	}
	slices.Sort(files)
	return files, nil
}

// Policies returns the documents' policies, in order.
func Policies(docs []Document) []*v1alpha1.LoadBalancerPolicy {
	out := make([]*v1alpha1.LoadBalancerPolicy, len(docs))
	for i, d := range docs {
		out[i] = d.Policy
	}
	return out
}
