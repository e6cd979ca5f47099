package chart

import (
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

var runtimeDefaultConverter = runtime.DefaultUnstructuredConverter

// metaItems lists the names in any object list.
func metaItems(list client.ObjectList) ([]string, error) {
	objs, err := meta.ExtractList(list)
	if err != nil {
		return nil, err
	}
	names := make([]string, 0, len(objs))
	for _, o := range objs {
		if m, err := meta.Accessor(o); err == nil {
			names = append(names, m.GetName())
		}
	}
	return names, nil
}
