package config

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/hashicorp/hcl/v2"
)

// maxCPUs bounds cpu_max: more CPUs than any host has is a typo.
const maxCPUs = 4096

// limits decodes memory_max and cpu_max. Whether this host can apply them
// is for CheckHost.
func (d *decoder) limits(attrs hcl.Attributes, ctx string, a *Agent) {
	var mem string
	if d.str(attrs, "memory_max", &mem) {
		n, err := ParseSize(mem)
		if err != nil {
			d.at(line(attrs["memory_max"]), ctx, "memory_max %q %v", mem, err)
		} else {
			a.MemoryMax = n
		}
	}
	if d.decode(attrs, "cpu_max", &a.CPUMax) && (a.CPUMax <= 0 || a.CPUMax > maxCPUs) {
		d.at(line(attrs["cpu_max"]), ctx, "cpu_max is a number of CPUs, more than 0 and at most %d (such as 0.5 or 2), got %g", maxCPUs, a.CPUMax)
		a.CPUMax = 0
	}
	a.memoryLine, a.cpuLine = lineOr(attrs, "memory_max", 0), lineOr(attrs, "cpu_max", 0)
}

// ParseSize reads a size in bytes: a number, or a number with a suffix K,
// M, G or T (powers of 1024, as cgroups read them), such as "512M".
func ParseSize(s string) (int64, error) {
	t := strings.TrimSpace(s)
	mult := int64(1)
	if t != "" {
		switch strings.ToUpper(t[len(t)-1:]) {
		case "K":
			mult = 1 << 10
		case "M":
			mult = 1 << 20
		case "G":
			mult = 1 << 30
		case "T":
			mult = 1 << 40
		}
		if mult > 1 {
			t = t[:len(t)-1]
		}
	}
	n, err := strconv.ParseFloat(t, 64)
	if err != nil || n <= 0 || n*float64(mult) >= 1<<62 {
		return 0, fmt.Errorf("is not a size: write a positive number of bytes, or one with a unit K, M, G or T (powers of 1024), such as \"512M\"")
	}
	return int64(n * float64(mult)), nil
}
