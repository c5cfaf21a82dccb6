package cli

import (
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"strconv"
	"strings"
	"time"

	"github.com/google/uuid"
	"github.com/spf13/cobra"

	"github.com/cairn-dev/cairn"
	"github.com/cairn-dev/cairn/backend/gotemplate"
	grpcbackend "github.com/cairn-dev/cairn/backend/grpc"
	cairnclient "github.com/cairn-dev/cairn/client"
	"github.com/cairn-dev/cairn/hub"
	"github.com/cairn-dev/cairn/labels"
	"github.com/cairn-dev/cairn/schema"
	"github.com/cairn-dev/cairn/store"
)

// Environment variables of the external backend settings.
const (
	EnvBackendTimeout = "CAIRN_BACKEND_TIMEOUT"
	EnvBackendTLS     = "CAIRN_BACKEND_TLS"
)

// The Type `backends register` gives a backend unless told otherwise; it
// is registered on first use.
const (
	GRPCStorageTypePath     = "cap.type.cairn.storage.grpc"
	GRPCStorageTypeRevision = "0.1.0"
)

func grpcStorageType() cairn.TypeRef {
	return cairn.TypeRef{Path: GRPCStorageTypePath, Revision: GRPCStorageTypeRevision}
}

// grpcStorageSchema is that Type's JSON Schema: the storage backend
// value of seed 000, with the url required.
const grpcStorageSchema = `{
  "$schema": "http://json-schema.org/draft-07/schema",
  "title": "External storage backend served over gRPC (storage_backend protocol)",
  "type": "object",
  "required": ["url", "acceptValue", "contextSchema"],
  "properties": {
    "url": {"type": "string", "minLength": 1, "description": "grpc://host:port (plaintext), grpcs://host:port or host:port (TLS)"},
    "acceptValue": {"type": "boolean"},
    "contextSchema": {"type": ["object", "null"]}
  }
}`

// backendOptions are the global settings for reaching external backends.
type backendOptions struct {
	timeout    time.Duration
	timeoutErr error
	tlsFile    string
	// capactURLs reads a bare host:port as plaintext (serve --compat capact).
	capactURLs bool
}

// addBackendFlags adds the external backend settings to the root command.
func (a *app) addBackendFlags(root *cobra.Command) {
	def := grpcbackend.DefaultTimeout
	if v := a.env.Getenv(EnvBackendTimeout); v != "" {
		d, err := time.ParseDuration(v)
		if err != nil || d <= 0 {
			a.backends.timeoutErr = fmt.Errorf("%s=%q: want a positive duration such as 10s", EnvBackendTimeout, v)
		} else {
			def = d
		}
	}
	f := root.PersistentFlags()
	f.DurationVar(&a.backends.timeout, "backend-timeout", def, "deadline of each call to an external storage backend [$"+EnvBackendTimeout+"]")
	f.StringVar(&a.backends.tlsFile, "backend-tls", a.env.Getenv(EnvBackendTLS),
		"YAML/JSON file mapping backend id or alias to {caFile, certFile, keyFile, serverName} [$"+EnvBackendTLS+"]")
}

// backendOpener returns the gRPC adapter through which the CLI's hub
// reaches external storage backends. The caller closes it.
func (a *app) backendOpener(log *slog.Logger) (*grpcbackend.Opener, error) {
	if a.backends.timeoutErr != nil {
		return nil, &usageError{err: a.backends.timeoutErr}
	}
	if a.backends.timeout <= 0 {
		return nil, usageErrorf("--backend-timeout %s: must be positive", a.backends.timeout)
	}
	cfg := grpcbackend.Config{Timeout: a.backends.timeout, Logger: log, CapactURLs: a.backends.capactURLs}
	if a.backends.tlsFile != "" {
		m, err := grpcbackend.LoadTLSConfigFile(a.backends.tlsFile)
		if err != nil {
			return nil, cairn.Errorf(cairn.CodeInvalid, "--backend-tls: %w", err)
		}
		cfg.TLS = m
	}
	o, err := grpcbackend.New(cfg)
	if err != nil {
		return nil, cairn.Errorf(cairn.CodeInvalid, "--backend-tls %s: %w", a.backends.tlsFile, err)
	}
	return o, nil
}

func (a *app) backendsCommand() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "backends",
		Short: "Register, list and check storage backends",
		Long: `A storage backend is where the values of TypeInstances live. The hub has a
built-in one; others are services speaking the storage_backend gRPC protocol
(Capact's), registered here as TypeInstances whose value is
{url, acceptValue, contextSchema}. Create a TypeInstance in one with
spec.backend.id set to the backend's id or alias.

A url is grpc://HOST:PORT (plaintext), or grpcs://HOST:PORT or HOST:PORT (TLS,
configured per backend with --backend-tls).`,
		Args: usageArgs(cobra.NoArgs),
		RunE: func(cmd *cobra.Command, args []string) error { return cmd.Help() },
	}
	cmd.AddCommand(a.backendsRegisterCommand(), a.backendsListCommand(), a.backendsGetCommand(), a.backendsCheckCommand(), a.backendsRecoverCommand(), a.backendsRotateKeysCommand())
	return cmd
}

func (a *app) backendsRegisterCommand() *cobra.Command {
	var (
		url, contextSchemaFile, alias, name, namespace, typeRef string
		acceptValue                                             bool
		labelArgs                                               []string
	)
	cmd := &cobra.Command{
		Use:   "register --url URL [--accept-value] [--context-schema FILE] [--alias A]",
		Short: "Register an external storage backend",
		Long: `Register creates the TypeInstance that describes an external storage backend:
its value is {url, acceptValue, contextSchema} and its latest resource version
has the attribute ` + cairn.StorageAttributePath + `.

--accept-value says the backend stores the values it is given
(ValueAndContextStorageBackend); without it the backend takes only a context
and derives the value (ContextStorageBackend). --context-schema names a JSON
Schema (YAML or JSON file) that contexts must satisfy; without it the backend
takes no context. The Type defaults to ` + grpcStorageType().String() + `, registered
on first use.`,
		Example: `  cairn backend file --dir ./values --listen 127.0.0.1:5051 &
  cairn backends register --url grpc://127.0.0.1:5051 --accept-value --alias files
  cairn backends register --url helm-backend.internal:5051 --context-schema helm-context.json --alias helm`,
		Args: usageArgs(cobra.NoArgs),
		RunE: func(cmd *cobra.Command, args []string) error {
			if url == "" {
				return usageErrorf("register needs --url")
			}
			if _, err := grpcbackend.ParseURL(url); err != nil {
				return cairn.Errorf(cairn.CodeInvalid, "--url: %w", err)
			}
			ref := grpcStorageType()
			if typeRef != "" {
				p, r := splitRef(typeRef)
				if p == "" || r == "" {
					return usageErrorf("--type %q: want PATH:REVISION", typeRef)
				}
				ref = cairn.TypeRef{Path: p, Revision: r}
			}
			contextSchema := json.RawMessage("null")
			if contextSchemaFile != "" {
				doc, err := a.readJSONFile(contextSchemaFile)
				if err != nil {
					return err
				}
				if !strings.HasPrefix(strings.TrimSpace(string(doc)), "{") {
					return cairn.Errorf(cairn.CodeInvalid, "--context-schema %s: want a JSON Schema object", contextSchemaFile)
				}
				// As the hub compiles context schemas: draft-07 unless "$schema" says otherwise.
				if _, err := schema.CompileDraft(doc, schema.Draft07); err != nil {
					return cairn.Errorf(cairn.CodeInvalid, "--context-schema %s: not a valid JSON Schema: %w", contextSchemaFile, err)
				}
				contextSchema = doc
			}
			lbls := map[string]string{"hub.cairn.dev/storage-backend": "true"}
			for _, l := range labelArgs {
				k, v, ok := strings.Cut(l, "=")
				if !ok {
					return usageErrorf("--label %q: want KEY=VALUE", l)
				}
				lbls[k] = v
			}
			if err := labels.Validate(lbls); err != nil {
				return cairn.Errorf(cairn.CodeInvalid, "--label: %w", err)
			}
			value, err := json.Marshal(map[string]any{"url": url, "acceptValue": acceptValue, "contextSchema": contextSchema})
			if err != nil {
				return err
			}
			return a.withClient(func(h cairnclient.Interface) error {
				ctx := cmd.Context()
				if ref == grpcStorageType() {
					if err := ensureGRPCStorageType(ctx, h); err != nil {
						return err
					}
				}
				out, err := h.CreateInstances(ctx, hub.CreateRequest{Instances: []hub.NewInstance{{
					Alias:      alias,
					Name:       cmp.Or(name, alias),
					Namespace:  namespace,
					TypeRef:    ref,
					Labels:     lbls,
					Value:      value,
					Attributes: []cairn.AttributeRef{{Path: cairn.StorageAttributePath, Revision: cairn.CoreRevision}},
				}}})
				if cairn.HasCode(err, cairn.CodeAlreadyExists) {
					return registeredAlready(ctx, h, cmp.Or(alias, name), value, err)
				}
				if err != nil {
					return err
				}
				v, err := backendView(ctx, h, out[0].ID)
				if err != nil {
					return err
				}
				if printed, err := a.printData(cmd.OutOrStdout(), v); printed {
					return err
				}
				_, err = fmt.Fprintf(cmd.OutOrStdout(), "storagebackend/%s/%s (id %s) registered: %s, %s\n",
					v.Namespace, v.Name, v.ID, v.URL, v.mode())
				return err
			})
		},
	}
	fl := cmd.Flags()
	fl.StringVar(&url, "url", "", "where the backend listens: grpc://HOST:PORT (plaintext), grpcs://HOST:PORT or HOST:PORT (TLS)")
	fl.BoolVar(&acceptValue, "accept-value", false, "the backend stores values (else it takes only a context)")
	fl.StringVar(&contextSchemaFile, "context-schema", "", "JSON Schema (YAML or JSON file) of the backend's context; none: no context")
	fl.StringVar(&alias, "alias", "", "alias to name the backend by (spec.backend.id accepts it)")
	fl.StringVar(&name, "name", "", "name of the backend's TypeInstance (default: the alias, else the id)")
	fl.StringVarP(&namespace, "namespace", "n", hub.SystemNamespace, "namespace of the backend's TypeInstance")
	fl.StringVar(&typeRef, "type", "", "Type PATH:REVISION of the backend's TypeInstance (default "+grpcStorageType().String()+")")
	fl.StringArrayVarP(&labelArgs, "label", "l", nil, "label KEY=VALUE; repeatable")
	return cmd
}

// registeredAlready adds to register's AlreadyExists how to change the
// backend that holds the name: register creates, it never overwrites a
// backend others may be using.
func registeredAlready(ctx context.Context, h cairnclient.Interface, ref string, value json.RawMessage, err error) error {
	id := "ID"
	if ref != "" {
		if found, rerr := resolveBackendRef(ctx, h, ref); rerr == nil {
			id = found
		}
	}
	return &cairn.Error{Code: cairn.CodeAlreadyExists, Err: err, Msg: fmt.Sprintf(
		"%v; to change a registered backend's url or settings, update its instance with the new value: cairn update %s --value-file FILE, FILE holding %s (see docs/backends.md#moving-a-backend)",
		err, id, value)}
}

// ensureGRPCStorageType registers the default backend Type unless it exists.
func ensureGRPCStorageType(ctx context.Context, h cairnclient.Interface) error {
	ref := grpcStorageType()
	_, err := h.GetType(ctx, ref)
	if err == nil {
		return nil
	}
	if !cairn.HasCode(err, cairn.CodeNotFound) {
		return err
	}
	_, _, err = h.ApplyType(ctx, cairn.Type{
		Path:           ref.Path,
		Revision:       ref.Revision,
		JSONSchema:     json.RawMessage(grpcStorageSchema),
		AdditionalRefs: []string{cairn.StorageTypePrefix},
	})
	if err != nil {
		return fmt.Errorf("register Type %s: %w", ref, err)
	}
	return nil
}

// storageBackendView is how the backends commands show a backend.
type storageBackendView struct {
	ID              string          `json:"id"`
	Alias           string          `json:"alias,omitempty"`
	Namespace       string          `json:"namespace"`
	Name            string          `json:"name"`
	TypeRef         cairn.TypeRef   `json:"typeRef"`
	URL             string          `json:"url,omitempty"`
	Transport       string          `json:"transport"` // built-in, plaintext or TLS
	AcceptValue     bool            `json:"acceptValue"`
	ContextSchema   json.RawMessage `json:"contextSchema"`
	Abstract        bool            `json:"abstract"`
	ResourceVersion int             `json:"resourceVersion"`
	UsedBy          int             `json:"usedBy"`
	CreatedAt       time.Time       `json:"createdAt"`
	// Error says why the instance is not a usable backend.
	Error string `json:"error,omitempty"`
}

func (v storageBackendView) mode() string {
	m := "takes a context only"
	if v.AcceptValue {
		m = "stores values"
	}
	if v.ContextSchema == nil || string(v.ContextSchema) == "null" {
		m += ", no context"
	} else {
		m += ", context schema set"
	}
	return m + ", " + v.Transport
}

// backendView describes the backend instance id without connecting to it.
func backendView(ctx context.Context, h cairnclient.Interface, id string) (storageBackendView, error) {
	inst, err := h.GetInstance(ctx, id, false)
	if err != nil {
		return storageBackendView{}, err
	}
	return describeBackend(ctx, h, inst), nil
}

func describeBackend(ctx context.Context, h cairnclient.Interface, inst cairn.Instance) storageBackendView {
	v := storageBackendView{
		ID: inst.ID, Alias: inst.Alias, Namespace: inst.Namespace, Name: inst.Name, TypeRef: inst.TypeRef,
		ResourceVersion: inst.Latest.ResourceVersion, UsedBy: len(inst.UsedBy), CreatedAt: inst.CreatedAt,
		ContextSchema: json.RawMessage("null"),
	}
	sb, err := h.StorageBackend(ctx, inst.ID)
	if err != nil {
		v.Error = err.Error()
		return v
	}
	v.URL, v.AcceptValue, v.Abstract = sb.URL, sb.AcceptValue, sb.Abstract
	if sb.ContextSchema != nil {
		v.ContextSchema = sb.ContextSchema
	}
	switch {
	case sb.Abstract:
		v.Transport = "built-in"
	case sb.URL == gotemplate.InProcessURL:
		// The hub runs it itself (hub/projection.go): no network.
		v.Transport = "in-process"
	default:
		t, err := grpcbackend.ParseURL(sb.URL)
		switch {
		case err != nil:
			v.Error = err.Error()
		case t.TLS:
			v.Transport = "TLS"
		default:
			v.Transport = "plaintext"
		}
	}
	return v
}

// resolveBackendRef turns an id or alias into a storage backend's id.
func resolveBackendRef(ctx context.Context, h cairnclient.Interface, ref string) (string, error) {
	if uuid.Validate(ref) == nil {
		return ref, nil
	}
	byAlias, err := storageBackendsByAlias(ctx, h)
	if err != nil {
		return "", err
	}
	switch ids := byAlias[ref]; len(ids) {
	case 1:
		return ids[0], nil
	case 0:
		return "", &cairn.Error{Code: cairn.CodeNotFound, IDs: []string{ref},
			Msg: fmt.Sprintf("%q is neither an id nor the alias of a storage backend (see cairn backends list)", ref)}
	default:
		return "", cairn.Errorf(cairn.CodeInvalid, "%q is the alias of several storage backends (%s); use an id", ref, cairn.QuoteIDs(ids))
	}
}

func (a *app) backendsListCommand() *cobra.Command {
	return &cobra.Command{
		Use:   "list",
		Short: "List storage backends",
		Long:  `List lists every TypeInstance with the attribute ` + cairn.StorageAttributePath + `, the built-in backend included, without connecting to them.`,
		Example: `  cairn backends list
  cairn backends list -o yaml`,
		Args: usageArgs(cobra.NoArgs),
		RunE: a.runE(func(cmd *cobra.Command, args []string, h cairnclient.Client) error {
			ctx := cmd.Context()
			list, err := h.ListInstances(ctx, store.InstanceFilter{
				Attributes: []store.AttributeFilter{{Path: cairn.StorageAttributePath}},
			}, false)
			if err != nil {
				return err
			}
			views := make([]storageBackendView, 0, len(list))
			for _, inst := range list {
				views = append(views, describeBackend(ctx, h, inst))
			}
			if printed, err := a.printData(cmd.OutOrStdout(), views); printed {
				return err
			}
			return a.backendTable(cmd.OutOrStdout(), views)
		}),
	}
}

func (a *app) backendTable(w io.Writer, views []storageBackendView) error {
	t := newTable(w, "ID", "ALIAS", "NAMESPACE/NAME", "URL", "TRANSPORT", "ACCEPT VALUE", "CONTEXT", "USED BY", "AGE")
	now := a.env.Now()
	for _, v := range views {
		url, transport := cmpOr(v.URL, "-"), v.Transport
		if v.Error != "" {
			transport = "invalid: " + v.Error
		}
		ctxCol := "none"
		if string(v.ContextSchema) != "null" {
			ctxCol = "schema"
		}
		t.row(v.ID, cmpOr(v.Alias, "-"), v.Namespace+"/"+v.Name, url, transport,
			strconv.FormatBool(v.AcceptValue), ctxCol, strconv.Itoa(v.UsedBy), age(now, v.CreatedAt))
	}
	return t.flush()
}

func (a *app) backendsGetCommand() *cobra.Command {
	return &cobra.Command{
		Use:     "get ID|ALIAS",
		Short:   "Show a storage backend",
		Example: "  cairn backends get files -o yaml",
		Args:    usageArgs(cobra.ExactArgs(1)),
		RunE: a.runE(func(cmd *cobra.Command, args []string, h cairnclient.Client) error {
			ctx := cmd.Context()
			id, err := resolveBackendRef(ctx, h, args[0])
			if err != nil {
				return err
			}
			v, err := backendView(ctx, h, id)
			if err != nil {
				return err
			}
			if printed, err := a.printData(cmd.OutOrStdout(), v); printed {
				return err
			}
			w := cmd.OutOrStdout()
			fmt.Fprintf(w, "ID:              %s\n", v.ID)
			fmt.Fprintf(w, "Alias:           %s\n", cmpOr(v.Alias, "<none>"))
			fmt.Fprintf(w, "Name:            %s/%s\n", v.Namespace, v.Name)
			fmt.Fprintf(w, "Type:            %s\n", v.TypeRef)
			fmt.Fprintf(w, "URL:             %s\n", cmpOr(v.URL, "<none>"))
			fmt.Fprintf(w, "Transport:       %s\n", cmpOr(v.Transport, "<unknown>"))
			fmt.Fprintf(w, "Accept Value:    %t\n", v.AcceptValue)
			fmt.Fprintf(w, "Context Schema:  %s\n", compactJSON(v.ContextSchema))
			fmt.Fprintf(w, "Used By:         %d TypeInstances\n", v.UsedBy)
			fmt.Fprintf(w, "Version:         %d\n", v.ResourceVersion)
			if v.Error != "" {
				fmt.Fprintf(w, "Error:           %s\n", v.Error)
			}
			return nil
		}),
	}
}

// checkResult is what `backends check` reports.
type checkResult struct {
	ID        string  `json:"id"`
	Alias     string  `json:"alias,omitempty"`
	URL       string  `json:"url,omitempty"`
	Service   string  `json:"service,omitempty"`
	Status    string  `json:"status"`
	TLS       bool    `json:"tls"`
	ConnectMS float64 `json:"connectMs"`
	RoundTrip float64 `json:"roundTripMs"`
	// The backend's writes waiting in the intent journal.
	PendingWrites  int    `json:"pendingWrites,omitempty"`
	RetryingWrites int    `json:"retryingWrites,omitempty"`
	LastError      string `json:"lastError,omitempty"`
}

func (a *app) backendsCheckCommand() *cobra.Command {
	return &cobra.Command{
		Use:   "check ID|ALIAS",
		Short: "Connect to a storage backend and report its health and round-trip time",
		Long: `Check connects to the backend, asks its grpc.health.v1 service about the
storage service it is called through, and reports the status, the time to
connect and the round-trip time of a second check, and how many interrupted
writes to the backend wait in the intent journal for recovery (with the latest
error recovery had with them). It exits 6 when the backend cannot be reached or
is not SERVING.`,
		Example: "  cairn backends check files",
		Args:    usageArgs(cobra.ExactArgs(1)),
		RunE: func(cmd *cobra.Command, args []string) error {
			return a.withClient(func(h cairnclient.Interface) error {
				ctx := cmd.Context()
				id, err := resolveBackendRef(ctx, h, args[0])
				if err != nil {
					return err
				}
				sb, health, err := h.CheckBackend(ctx, id)
				if err != nil {
					return err
				}
				r := checkResult{ID: sb.ID, Alias: sb.Alias, URL: sb.URL,
					Service: health.Service, Status: health.Status, TLS: health.TLS,
					ConnectMS: ms(health.Connect), RoundTrip: ms(health.RoundTrip),
					PendingWrites: health.PendingWrites, RetryingWrites: health.RetryingWrites, LastError: health.LastError}
				if printed, err := a.printData(cmd.OutOrStdout(), r); !printed {
					err = printCheck(cmd.OutOrStdout(), r, sb.Abstract)
					if err != nil {
						return err
					}
				} else if err != nil {
					return err
				}
				if r.Status != "SERVING" {
					return &cairn.Error{Code: cairn.CodeUnavailable, IDs: []string{sb.ID},
						Msg: fmt.Sprintf("External backend %q is %s", sb.ID, r.Status)}
				}
				return nil
			})
		},
	}
}

func printCheck(w io.Writer, r checkResult, builtin bool) error {
	name := r.ID
	if r.Alias != "" {
		name = fmt.Sprintf("%s (%s)", r.Alias, r.ID)
	}
	if builtin {
		_, err := fmt.Fprintf(w, "backend %s: SERVING (built in: the hub keeps these values in its own store)\n", name)
		return err
	}
	if strings.HasPrefix(r.URL, "inprocess://") {
		_, err := fmt.Fprintf(w, "backend %s: %s (runs inside the hub)\n", name, r.Status)
		return err
	}
	transport := "plaintext"
	if r.TLS {
		transport = "TLS"
	}
	service := r.Service
	if service == "" {
		service = "server as a whole"
	}
	if _, err := fmt.Fprintf(w, "backend %s at %s: %s (%s, %s), connect %.2f ms, round trip %.2f ms\n",
		name, r.URL, r.Status, service, transport, r.ConnectMS, r.RoundTrip); err != nil {
		return err
	}
	if r.PendingWrites == 0 {
		return nil
	}
	what := "1 interrupted write waits"
	if r.PendingWrites != 1 {
		what = fmt.Sprintf("%d interrupted writes wait", r.PendingWrites)
	}
	_, err := fmt.Fprintf(w, "  %s for recovery", what)
	if err == nil && r.RetryingWrites > 0 {
		_, err = fmt.Fprintf(w, " (%d failed so far; latest error: %s)", r.RetryingWrites, r.LastError)
	}
	if err == nil {
		_, err = fmt.Fprintln(w)
	}
	return err
}

func (a *app) backendsRecoverCommand() *cobra.Command {
	var grace time.Duration
	cmd := &cobra.Command{
		Use:   "recover",
		Short: "Finish the writes to external backends that were interrupted (local mode)",
		Long: `Recover does once, on the local store, what cairn serve's recovery controller
does every --recovery-interval: it finishes the external writes left in the
intent journal that are older than --grace. A create or update that never
committed is undone in its backend, the value of an instance deleted while its
backend was down is deleted there. See docs/reliability.md.

Local mode needs it because no controller runs there: a delete while the
backend is down succeeds and leaves the value in the backend until a recovery
runs. It exits 6 when a backend still cannot finish a write (it is retried at
the next run). Keep --grace above --backend-timeout while another process
(cairn serve, another cairn command) may be writing to the same store: a
younger write may still be on its way.`,
		Example: "  cairn backends check files     # 1 interrupted write waits for recovery\n  cairn backends recover --grace 0s",
		Args:    usageArgs(cobra.NoArgs),
		RunE: func(cmd *cobra.Command, args []string) error {
			if grace < 0 {
				return usageErrorf("--grace %s: want a duration of 0 or more", grace)
			}
			if a.hub == nil {
				return usageErrorf("recover works on a local store; a server (%s) runs recovery itself every --recovery-interval", a.target.from)
			}
			// What failed is the command's error, not a log line too.
			a.quietHub.Store(true)
			res, err := a.hub.RecoverNow(cmd.Context(), grace)
			if err != nil {
				return err
			}
			view := recoverView{Undone: res.Undone, Deleted: res.Deleted, Restored: res.Restored,
				Committed: res.Committed, Waiting: res.Waiting, Failed: []recoverFailure{}}
			for _, in := range res.Failed {
				view.Failed = append(view.Failed, recoverFailure{InstanceID: in.InstanceID, ResourceVersion: in.ResourceVersion,
					BackendID: in.BackendID, Op: string(in.Op), Attempts: in.Attempts, Error: in.LastError})
			}
			if printed, err := a.printData(cmd.OutOrStdout(), view); printed || err != nil {
				return cmp.Or(err, recoverFailed(res))
			}
			w := cmd.OutOrStdout()
			for _, c := range []struct {
				n    int
				what string
			}{
				{res.Undone, "interrupted write undone in its backend"},
				{res.Deleted, "deleted value removed from its backend"},
				{res.Restored, "value of a delete that never committed put back"},
				{res.Committed, "finished write whose journal entry was left"},
			} {
				if c.n > 0 {
					fmt.Fprintf(w, "%d %s\n", c.n, plural(c.n, c.what))
				}
			}
			if res.Waiting > 0 {
				fmt.Fprintf(w, "%d %s younger than --grace %s left alone\n", res.Waiting, plural(res.Waiting, "write"), grace)
			}
			if res.Undone+res.Deleted+res.Restored+res.Committed+res.Waiting+len(res.Failed) == 0 {
				fmt.Fprintln(w, "no interrupted writes")
			}
			return recoverFailed(res)
		},
	}
	cmd.Flags().DurationVar(&grace, "grace", time.Minute, "how old an interrupted write must be to be finished; younger ones may still be on their way")
	return cmd
}

// recoverView is what backends recover reports with -o json or yaml.
type recoverView struct {
	Undone    int              `json:"undone"`
	Deleted   int              `json:"deleted"`
	Restored  int              `json:"restored"`
	Committed int              `json:"committed"`
	Waiting   int              `json:"waiting"`
	Failed    []recoverFailure `json:"failed"`
}

type recoverFailure struct {
	InstanceID      string `json:"instanceId"`
	ResourceVersion int    `json:"resourceVersion"`
	BackendID       string `json:"backendId"`
	Op              string `json:"op"`
	Attempts        int    `json:"attempts"`
	Error           string `json:"error"`
}

// plural puts the first word of what in the plural when n is not 1
// ("write undone" -> "writes undone").
func plural(n int, what string) string {
	if n == 1 {
		return what
	}
	first, rest, _ := strings.Cut(what, " ")
	return strings.TrimSpace(first + "s " + rest)
}

// recoverFailed is recover's error when writes are left: each names its
// instance, backend and the backend's error.
func recoverFailed(res hub.RecoveryResult) error {
	if len(res.Failed) == 0 {
		return nil
	}
	lines := make([]string, len(res.Failed))
	ids := make([]string, len(res.Failed))
	for i, in := range res.Failed {
		lines[i] = fmt.Sprintf("  %s of TypeInstance %q (resource version %d) in backend %q: %s", in.Op, in.InstanceID, in.ResourceVersion, in.BackendID, in.LastError)
		ids[i] = in.BackendID
	}
	what := "1 interrupted write could not be finished"
	if len(res.Failed) != 1 {
		what = fmt.Sprintf("%d interrupted writes could not be finished", len(res.Failed))
	}
	return &cairn.Error{Code: cairn.CodeUnavailable, IDs: ids,
		Msg: what + "; run recover again once the backend answers:\n" + strings.Join(lines, "\n")}
}

func ms(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }

func (a *app) backendsRotateKeysCommand() *cobra.Command {
	var add, remove []string
	cmd := &cobra.Command{
		Use:   "rotate-keys ID|ALIAS",
		Short: "Re-encrypt a SOPS Git backend's files to new age recipients in one commit",
		Long: `Rotate-keys re-encrypts every SOPS-encrypted file of a Git backend with
encryption.sops to its age recipients plus --add-age minus --remove-age, in
one commit (the files are decrypted with the backend's current identities
first, so a file they cannot read stops the rotation before anything
changes), then records the new recipients as the backend instance's next
resource version, so later writes encrypt to them. Older commits stay
readable with the keys they were written with. See docs/secrets.md.`,
		Example: `  cairn backends rotate-keys secrets-repo --add-age age1new... --remove-age age1old...`,
		Args:    usageArgs(cobra.ExactArgs(1)),
		RunE: func(cmd *cobra.Command, args []string) error {
			if len(add)+len(remove) == 0 {
				return usageErrorf("name recipients with --add-age or --remove-age")
			}
			return a.withClient(func(h cairnclient.Interface) error {
				ctx := cmd.Context()
				id, err := resolveBackendRef(ctx, h, args[0])
				if err != nil {
					return err
				}
				res, err := h.RotateBackendKeys(ctx, id, hub.KeyRotation{AddAge: add, RemoveAge: remove})
				if err != nil {
					return err
				}
				if printed, err := a.printData(cmd.OutOrStdout(), res); printed {
					return err
				}
				commit := res.Commit
				if commit == "" {
					commit = "none (no file to re-encrypt)"
				}
				_, err = fmt.Fprintf(cmd.OutOrStdout(), "backend %s: %d files re-encrypted, commit %s; recipients recorded as resource version %d\n",
					args[0], res.Files, commit, res.ResourceVersion)
				return err
			})
		},
	}
	cmd.Flags().StringArrayVar(&add, "add-age", nil, "age recipient (age1...) to add; repeatable")
	cmd.Flags().StringArrayVar(&remove, "remove-age", nil, "age recipient to remove; repeatable")
	return cmd
}
