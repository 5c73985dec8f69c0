package options

import (
	"strings"
	"testing"
)

func TestRateLimitResource(t *testing.T) {
	tests := []struct {
		in      string
		name    string
		count   uint64
		device  int
		wantErr string
	}{
		{in: "R1:4", name: "R1", count: 4, device: -1},
		{in: "Gpu_Mem:2:1", name: "Gpu_Mem", count: 2, device: 1}, // the name as typed, though Triton's help says case-insensitive
		{in: ":0", name: "", count: 0, device: -1},
		{in: "R1", wantErr: "--rate-limit-resource option format is '<resource_name>:<count>:<device>' or '<resource_name>:<count>'. Got R1"},
		{in: "R1:1:2:3", wantErr: "option format is '<resource_name>:<count>:<device>' or '<resource_name>:<count>'. Got R1:1:2:3"},
		{in: "R1:four", wantErr: "Invalid option value. Got four"},
		{in: "R1:4:gpu0", wantErr: "Invalid option value. Got gpu0"},
		{in: "R1:99999999999999999999", wantErr: "Provided option value is out of bound. Got 99999999999999999999"},
		{in: "R1:-1", wantErr: "must not be negative"},
	}
	for _, tt := range tests {
		name, count, device, err := RateLimitResource(tt.in)
		switch {
		case tt.wantErr != "":
			if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
				t.Errorf("%q: error %v, want %q", tt.in, err, tt.wantErr)
			}
		case err != nil:
			t.Errorf("%q: %v", tt.in, err)
		case name != tt.name || count != tt.count || device != tt.device:
			t.Errorf("%q: %q %d %d, want %q %d %d", tt.in, name, count, device, tt.name, tt.count, tt.device)
		}
	}
}

func TestRateLimitModes(t *testing.T) {
	for _, v := range []string{"off", "execution_count", "EXECUTION_COUNT", "Off"} {
		if _, err := Parse([]string{"--rate-limit=" + v}); err != nil {
			t.Errorf("--rate-limit=%s: %v", v, err)
		}
	}
	_, err := Parse([]string{"--rate-limit=sometimes"})
	if err == nil || !strings.Contains(err.Error(), "invalid argument for --rate-limit") {
		t.Errorf("--rate-limit=sometimes: %v", err)
	}
}
