package sagemaker

import "testing"

func TestServedFromHeader(t *testing.T) {
	for in, want := range map[string]string{"": "", "resnet.tar.gz": "resnet.tar.gz", "a/b/model.tar.gz": "a_b_model.tar.gz"} {
		if got := servedFromHeader(in); got != want {
			t.Errorf("servedFromHeader(%q) = %q, want %q", in, got, want)
		}
	}
}
