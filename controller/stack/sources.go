package stack

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strings"

	"sigs.k8s.io/yaml"

	"github.com/cairn-dev/cairn"
	"github.com/cairn-dev/cairn/hub"
)

// Parameter sources: an installation may give parameters by reference to
// other instances (hub.AnnotationParametersFrom), today a Terraform output:
//
//	stacks.cairn.dev/parameters-from: |
//	  vpcCIDR: {terraformOutput: network-vpc-cidr}
//
// Every reconcile reads the sources again and renders with their current
// values (a source wins over the same parameter in the spec), so a new
// tofu apply flows into the installation's children. The installation uses
// each source instance (a uses edge), so the state cannot drop an output a
// stack reads; and a change of a source triggers the installation.

// source is one parameter's reference.
type source struct {
	TerraformOutput string `json:"terraformOutput"`
}

// parseSources reads the annotation: parameter name -> source.
func parseSources(text string) (map[string]source, error) {
	var raw map[string]json.RawMessage
	if err := yaml.Unmarshal([]byte(text), &raw); err != nil {
		return nil, fmt.Errorf("annotation %s: not a mapping of parameter to source: %v", hub.AnnotationParametersFrom, err)
	}
	out := make(map[string]source, len(raw))
	for _, p := range slices.Sorted(maps.Keys(raw)) {
		var s source
		dec := json.NewDecoder(strings.NewReader(string(raw[p])))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&s); err != nil {
			return nil, fmt.Errorf("annotation %s: parameter %s: a source is {terraformOutput: NAME}: %v", hub.AnnotationParametersFrom, p, err)
		}
		if s.TerraformOutput == "" {
			return nil, fmt.Errorf("annotation %s: parameter %s: a source is {terraformOutput: NAME}, NAME being <state>-<output>", hub.AnnotationParametersFrom, p)
		}
		out[p] = s
	}
	return out, nil
}

// withSources returns inst with the parameters its sources give merged
// into its spec (inst itself is not changed), and the ids of the instances
// it reads, existing or not (a source created later triggers it).
func (c *Controller) withSources(ctx context.Context, inst cairn.Instance) (cairn.Instance, []string, *reconcileError) {
	text := inst.Annotations[hub.AnnotationParametersFrom]
	if text == "" {
		return inst, nil, nil
	}
	srcs, err := parseSources(text)
	if err != nil {
		return inst, nil, badInput("InvalidParameterSource", "%v", err)
	}
	spec := specOf(inst)
	if spec == nil {
		spec = map[string]any{}
	}
	var watch []string
	for _, p := range slices.Sorted(maps.Keys(srcs)) {
		name := srcs[p].TerraformOutput
		watch = append(watch, hub.TerraformOutputID(inst.Namespace, name))
		out, err := c.hub.GetInstanceByName(ctx, hub.TerraformOutputPath, inst.Namespace, name, true)
		if cairn.HasCode(err, cairn.CodeNotFound) {
			if _, serr := c.hub.GetInstanceByName(ctx, hub.TerraformSensitivePath, inst.Namespace, name, false); serr == nil {
				return inst, watch, badInput("InvalidParameterSource",
					"parameter %s: Terraform output %s/%s is sensitive: its value would be stored in the children and shown in lists; it cannot be a parameter", p, inst.Namespace, name)
			}
			return inst, watch, badInput("ParameterSourceNotFound",
				"parameter %s: Terraform output %s/%s does not exist (yet): its state has no such output", p, inst.Namespace, name)
		}
		if err != nil {
			return inst, watch, &reconcileError{reason: "ReadError", msg: fmt.Sprintf("parameter %s: %v", p, err), retry: true}
		}
		var v struct {
			Value any `json:"value"`
		}
		if err := json.Unmarshal(out.Latest.Value, &v); err != nil {
			return inst, watch, badInput("InvalidParameterSource", "parameter %s: Terraform output %s/%s: %v", p, inst.Namespace, name, err)
		}
		spec[p] = v.Value
	}
	b, err := json.Marshal(spec)
	if err != nil {
		return inst, watch, badInput("InvalidParameterSource", "%v", err)
	}
	eff := inst
	eff.Latest.Value = b
	return eff, watch, nil
}

// useSources makes the installation use exactly the Terraform outputs its
// sources read (those that exist), adding and removing uses edges. Output
// ids are readable (hub.TerraformOutputID), so the installation's other
// edges (children, dependencies, its backend) are told apart without a read.
func (c *Controller) useSources(ctx context.Context, inst cairn.Instance, ids []string) error {
	var stale, missing []string
	for _, u := range inst.Uses {
		if isOutputID(u) && !slices.Contains(ids, u) {
			stale = append(stale, u)
		}
	}
	for _, id := range ids {
		if !slices.Contains(inst.Uses, id) {
			missing = append(missing, id)
		}
	}
	if err := c.hub.RemoveUses(ctx, inst.ID, stale); err != nil {
		return fmt.Errorf("stop using Terraform outputs %s: %w", strings.Join(stale, ", "), err)
	}
	if len(missing) == 0 {
		return nil
	}
	found, err := c.hub.GetInstances(ctx, missing)
	if err != nil {
		return err
	}
	var add []string
	for _, f := range found {
		add = append(add, f.ID)
	}
	if err := c.hub.AddUses(ctx, inst.ID, add); err != nil && !cairn.HasCode(err, cairn.CodeNotFound) {
		return fmt.Errorf("use Terraform outputs %s: %w", strings.Join(add, ", "), err)
	}
	return nil
}

func isOutputID(id string) bool {
	return strings.HasPrefix(id, "terraformoutput.") || strings.HasPrefix(id, "terraformsensitiveoutput.")
}

// setSources records which instances an installation reads, so that a
// change of one triggers it.
func (c *Controller) setSources(inst string, ids []string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for src, insts := range c.sources {
		delete(insts, inst)
		if len(insts) == 0 {
			delete(c.sources, src)
		}
	}
	for _, id := range ids {
		if c.sources[id] == nil {
			c.sources[id] = map[string]bool{}
		}
		c.sources[id][inst] = true
	}
}

// readers returns the installations that read instance id.
func (c *Controller) readers(id string) []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return slices.Collect(maps.Keys(c.sources[id]))
}
