package cgroupfs

import "testing"

func TestExpandSlice(t *testing.T) {
	for in, want := range map[string]string{
		"-.slice":                           "/",
		"kubepods.slice":                    "/kubepods.slice",
		"kubepods-burstable.slice":          "/kubepods.slice/kubepods-burstable.slice",
		"kubepods-burstable-pod1_2.slice":   "/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod1_2.slice",
		"kubelet-kubepods-besteffort.slice": "/kubelet.slice/kubelet-kubepods.slice/kubelet-kubepods-besteffort.slice",
		"kubepods":                          "",
		"-kubepods.slice":                   "",
		"kubepods-.slice":                   "",
		"kube--pods.slice":                  "",
		"a/b.slice":                         "",
	} {
		got, ok := expandSlice(in)
		if got != want || ok != (want != "") {
			t.Errorf("expandSlice(%q) = %q, %v; want %q", in, got, ok, want)
		}
	}
}
