// Command gonulls lists the JSON fields that Go's encoding/json writes as null when they are unset, in the
// types that Go clients and webhooks use to write TFJob, PyTorchJob, JAXJob, XGBoostJob, PaddleJob and MPIJob
// objects: core/v1 PodTemplateSpec and the Kubeflow job types.
//
// Why: a CRD field that is not `nullable: true` rejects a null that a mutating webhook puts back (Kueue's
// webhook writes `creationTimestamp: null` into every pod template). kubetrain/api/podschema.py GO_NULLS
// and kubetrain/api/crd.py _GO_NULLS must name these fields; tests/integration/test_go_nulls_source.py
// runs this command and compares.
//
// Output: one line per field, `<OpenAPI definition name>\t<json name>\t<why>`, sorted; why is `time`
// (a metav1.Time, which omitempty never omits) or the Go kind (ptr, slice, map) of a field without
// omitempty.
package main

import (
	"fmt"
	"reflect"
	"sort"
	"strings"

	kubeflowv1 "github.com/kubeflow/training-operator/pkg/apis/kubeflow.org/v1"
	mpiv2beta1 "github.com/kubeflow/mpi-operator/pkg/apis/kubeflow/v2beta1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

var times = map[reflect.Type]bool{
	reflect.TypeOf(metav1.Time{}):      true,
	reflect.TypeOf(metav1.MicroTime{}): true,
}

// definitionName turns a Go type into its OpenAPI name: k8s.io/api/core/v1.PodSpec -> io.k8s.api.core.v1.PodSpec.
func definitionName(t reflect.Type) string {
	host, path, _ := strings.Cut(t.PkgPath(), "/")
	labels := strings.Split(host, ".")
	for i, j := 0, len(labels)-1; i < j; i, j = i+1, j-1 {
		labels[i], labels[j] = labels[j], labels[i]
	}
	return strings.Join(labels, ".") + "." + strings.ReplaceAll(path, "/", ".") + "." + t.Name()
}

type walker struct {
	seen  map[reflect.Type]bool
	found map[string]bool
}

func (w *walker) walk(t reflect.Type) {
	for t.Kind() == reflect.Pointer || t.Kind() == reflect.Slice || t.Kind() == reflect.Map {
		t = t.Elem()
	}
	if t.Kind() != reflect.Struct || w.seen[t] || times[t] || t.PkgPath() == "" {
		return
	}
	w.seen[t] = true
	for i := 0; i < t.NumField(); i++ {
		field := t.Field(i)
		tag := field.Tag.Get("json")
		name, options, _ := strings.Cut(tag, ",")
		if tag == "-" || !field.IsExported() {
			continue
		}
		if field.Anonymous && name == "" {
			w.walk(field.Type)
			continue
		}
		kind := field.Type.Kind()
		omitempty := strings.Contains(","+options+",", ",omitempty,")
		switch {
		case times[field.Type]:
			w.found[definitionName(t)+"\t"+name+"\ttime"] = true
		case !omitempty && (kind == reflect.Pointer || kind == reflect.Slice || kind == reflect.Map):
			w.found[definitionName(t)+"\t"+name+"\t"+kind.String()] = true
		}
		w.walk(field.Type)
	}
}

func main() {
	w := &walker{seen: map[reflect.Type]bool{}, found: map[string]bool{}}
	for _, root := range []any{corev1.PodTemplateSpec{}, kubeflowv1.TFJob{}, kubeflowv1.PyTorchJob{}, kubeflowv1.JAXJob{}, kubeflowv1.XGBoostJob{}, kubeflowv1.PaddleJob{}, mpiv2beta1.MPIJob{}} {
		w.walk(reflect.TypeOf(root))
	}
	lines := make([]string, 0, len(w.found))
	for line := range w.found {
		lines = append(lines, line)
	}
	sort.Strings(lines)
	for _, line := range lines {
		fmt.Println(line)
	}
}
