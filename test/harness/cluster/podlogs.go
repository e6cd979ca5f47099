package cluster

import (
	"context"
	"io"
	"os"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
)

// FollowPodLogs copies the logs of every pod of namespace on node into the
// cluster's logs directory (pod-<name>.log) as they are written, until ctx
// ends. kubelet deletes a pod's logs with the pod, so a pod that stops
// badly (an agent killed at the end of its grace period, say) would leave
// nothing to read afterwards.
func (c *Cluster) FollowPodLogs(ctx context.Context, namespace, node string) error {
	cfg, err := c.RESTConfig()
	if err != nil {
		return err
	}
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return err
	}
	go func() {
		following := map[string]bool{}
		for ctx.Err() == nil {
			pods, err := cs.CoreV1().Pods(namespace).List(ctx, metav1.ListOptions{FieldSelector: "spec.nodeName=" + node})
			if err == nil {
				for _, p := range pods.Items {
					if following[string(p.UID)] || p.Status.Phase == corev1.PodPending {
						continue
					}
					following[string(p.UID)] = true
					go c.copyPodLog(ctx, cs, p)
				}
			}
			select {
			case <-ctx.Done():
			case <-time.After(time.Second):
			}
		}
	}()
	return nil
}

// copyPodLog streams one pod's logs, all of its containers', to its file.
func (c *Cluster) copyPodLog(ctx context.Context, cs *kubernetes.Clientset, p corev1.Pod) {
	f, err := os.OpenFile(c.logPath("pod-"+p.Name), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return
	}
	defer f.Close()
	for _, ct := range p.Spec.Containers {
		go func() {
			s, err := cs.CoreV1().Pods(p.Namespace).GetLogs(p.Name, &corev1.PodLogOptions{Container: ct.Name, Follow: true, Timestamps: true}).Stream(ctx)
			if err != nil {
				return
			}
			defer s.Close()
			_, _ = io.Copy(f, s)
		}()
	}
	<-ctx.Done()
}
