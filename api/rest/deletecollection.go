package rest

import (
	"net/http"
	"strconv"

	"github.com/cairn-dev/cairn"
	"github.com/cairn-dev/cairn/hub"
)

// deleteCollection is DELETE on a collection (deletecollection, client-go's
// DeleteCollection): every object the label and field selectors match is
// deleted, and the answer is the list of them as they were, as the API
// server answers. Unlike the API server, which deletes them one by one and
// may stop halfway, the hub deletes them in one transaction, all or none
// (hub.DeleteInstances): a locked one or one used from outside the set
// refuses the whole request. DeleteOptions' dryRun applies; preconditions,
// which name one object, are refused. For a served kind it is served in a
// namespace only, as the API server serves it.
func (s *Server) deleteCollection(w http.ResponseWriter, r *http.Request, req request) error {
	opts, r, err := s.readDeleteOptions(w, r)
	if err != nil {
		return err
	}
	if opts.Preconditions != nil || query(r).Get("resourceVersion") != "" {
		return errStatus{badRequest("preconditions (uid, resourceVersion) name one object: a delete of a collection takes none")}
	}
	o, err := parseListOptions(r, req.res)
	if err != nil {
		return err
	}
	f := o.filter(req)
	f.Limit, f.After = 0, nil // every match, not a page
	if req.res.hubKind == "typeinstances" {
		if err := hubListFilter(r, &f); err != nil {
			return err
		}
	}
	insts, seq, err := s.hub.ListInstancesWith(r.Context(), f, hub.ListOptions{Values: true})
	if err != nil {
		return err
	}
	var gone []cairn.Instance // in the list's order (o.filter's)
	for i := range insts {
		if o.matches(&insts[i]) {
			gone = append(gone, insts[i])
		}
	}
	ids := make([]string, len(gone))
	for i, inst := range gone {
		ids[i] = inst.ID
		name := inst.Name
		if req.res.hubKind == "typeinstances" {
			name = inst.ID
		}
		if err := s.refuseOrphan(r.Context(), opts, req.res.kind, name, inst); err != nil {
			return err
		}
	}
	if err := s.hub.DeleteInstances(r.Context(), ids, query(r).Get("lockOwner")); err != nil {
		return errStatus{errorStatus(err, target{group: req.res.group})}
	}
	out := List{APIVersion: req.res.apiVersion(), Kind: req.res.kind + "List", Items: []any{},
		Metadata: ListMeta{ResourceVersion: strconv.FormatInt(seq, 10)}}
	if req.res.hubKind == "typeinstances" {
		for _, inst := range gone {
			out.Items = append(out.Items, toTypeInstance(inst))
		}
	} else {
		objs, err := s.objects(r, req.res, gone)
		if err != nil {
			return err
		}
		for _, obj := range objs {
			out.Items = append(out.Items, obj)
		}
	}
	s.writeRead(w, r, req.res, out)
	return nil
}
