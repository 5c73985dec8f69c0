package as

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore"
	"github.com/Azure/azure-sdk-for-go/sdk/azcore/policy"
	"github.com/Azure/azure-sdk-for-go/sdk/azidentity"
	"github.com/Azure/azure-sdk-for-go/sdk/storage/azblob/container"
)

// Credentials are Triton's Azure credential settings: the variables
// AZURE_STORAGE_ACCOUNT, AZURE_STORAGE_KEY, AZURE_STORAGE_AUTH_TYPE and
// AZURE_STORAGE_CLIENT_ID, or the fields account_str, account_key,
// auth_type and client_id of a credential file's "as" entry.
type Credentials struct {
	// Account, when set, is the storage account used whatever the URL
	// names, as in Triton.
	Account string
	// Key is the account's shared key (base64).
	Key string
	// AuthType is "key", "managed_identity", "default" or empty: empty
	// means the key when there is one.
	AuthType string
	// ClientID selects a user-assigned managed identity.
	ClientID string
	// Source says in messages where these came from, for instance
	// `credential file /etc/creds.json entry "as://acct"`.
	Source string
}

// storageScope is the token audience of Azure Storage.
const storageScope = "https://storage.azure.com/.default"

// probeTimeout bounds the look for default credentials when none were
// named; off Azure the managed identity endpoint may never answer.
const probeTimeout = 5 * time.Second

// auth is how one root reaches its account.
type auth struct {
	account  string
	endpoint string // the blob service URL, without a trailing "/"
	source   string
	key      *container.SharedKeyCredential
	token    azcore.TokenCredential
	sas      string // a shared access signature query, without "?"
}

func (a auth) containerClient(cont string) (*container.Client, error) {
	u := a.endpoint + "/" + url.PathEscape(cont)
	opts := &container.ClientOptions{ClientOptions: policy.ClientOptions{Retry: retry, Transport: transport}}
	switch {
	case a.key != nil:
		return container.NewClientWithSharedKeyCredential(u, a.key, opts)
	case a.token != nil:
		return container.NewClient(u, a.token, opts)
	case a.sas != "":
		return container.NewClientWithNoCredential(u+"?"+a.sas, opts)
	}
	return container.NewClientWithNoCredential(u, opts)
}

// transport is Go's default with compression off: asking for gzip would
// make net/http gunzip blobs stored with Content-Encoding gzip, and the
// bytes would no longer be those the Content-MD5 describes. A service that
// accepts the connection but never answers fails after a minute.
var transport = func() *http.Client {
	t := http.DefaultTransport.(*http.Transport).Clone()
	t.DisableCompression = true
	t.ResponseHeaderTimeout = time.Minute
	return &http.Client{Transport: t}
}()

// envCredentials reads Triton's variables.
func envCredentials(getenv func(string) string) Credentials {
	c := Credentials{
		Account:  getenv("AZURE_STORAGE_ACCOUNT"),
		Key:      getenv("AZURE_STORAGE_KEY"),
		AuthType: getenv("AZURE_STORAGE_AUTH_TYPE"),
		ClientID: getenv("AZURE_STORAGE_CLIENT_ID"),
	}
	var set []string
	for _, v := range []struct{ name, val string }{
		{"AZURE_STORAGE_ACCOUNT", c.Account}, {"AZURE_STORAGE_KEY", c.Key},
		{"AZURE_STORAGE_AUTH_TYPE", c.AuthType}, {"AZURE_STORAGE_CLIENT_ID", c.ClientID},
	} {
		if v.val != "" {
			set = append(set, v.name)
		}
	}
	c.Source = "environment " + strings.Join(set, ", ")
	if len(set) == 0 {
		c.Source = "environment (no AZURE_STORAGE_ variable set)"
	}
	return c
}

// resolve finds the endpoint and credentials of a root naming account.
// Credentials come from given (a credential file entry) when set, else
// from Triton's variables; with neither a key nor an auth type, from the
// connection string's AccountKey or SharedAccessSignature; with none of
// these, from the default Azure credential chain when it yields a token,
// else none (anonymous access, as in Triton).
func resolve(ctx context.Context, account string, given *Credentials, getenv func(string) string, log *slog.Logger) (auth, error) {
	var c Credentials
	if given != nil {
		c = *given
	} else {
		c = envCredentials(getenv)
	}
	if c.Account != "" && c.Account != account {
		if !accountName().MatchString(c.Account) {
			return auth{}, fmt.Errorf("%s: account %q is not a valid storage account name (3-24 lowercase letters and digits)", c.Source, c.Account)
		}
		log.Info("azure: the storage account from the credentials replaces the one in the URL", "url", account, "account", c.Account, "from", c.Source)
		account = c.Account
	}
	cs, err := parseConnectionString(getenv("AZURE_STORAGE_CONNECTION_STRING"))
	if err != nil {
		return auth{}, fmt.Errorf("AZURE_STORAGE_CONNECTION_STRING: %w", err)
	}
	// A connection string for another account leaves this root alone.
	useCS := cs.set && (cs.account == "" || cs.account == account)
	a := auth{account: account, endpoint: "https://" + account + ".blob.core.windows.net"}
	if useCS && cs.endpoint != "" {
		a.endpoint = cs.endpoint
	}
	switch c.AuthType {
	case "managed_identity":
		opts := &azidentity.ManagedIdentityCredentialOptions{}
		a.source = c.Source + ": managed identity"
		if c.ClientID != "" {
			opts.ID = azidentity.ClientID(c.ClientID)
			a.source += " (client id " + c.ClientID + ")"
		}
		if a.token, err = azidentity.NewManagedIdentityCredential(opts); err != nil {
			return auth{}, fmt.Errorf("%s: %s", a.source, oneLine(err))
		}
		return a, nil
	case "default":
		a.source = c.Source + ": default Azure credential chain"
		if a.token, err = azidentity.NewDefaultAzureCredential(nil); err != nil {
			return auth{}, fmt.Errorf("%s: %s", a.source, oneLine(err))
		}
		return a, nil
	case "key", "":
		if c.Key != "" {
			a.source = c.Source + ": shared key of account " + account
			if a.key, err = container.NewSharedKeyCredential(account, c.Key); err != nil {
				return auth{}, fmt.Errorf("%s: the account key is not valid base64", a.source)
			}
			return a, nil
		}
		if c.AuthType == "key" {
			return auth{}, fmt.Errorf("%s: auth type \"key\" needs an account key", c.Source)
		}
	default:
		return auth{}, fmt.Errorf("%s: auth type %q is not one of \"key\", \"managed_identity\", \"default\"", c.Source, c.AuthType)
	}
	if given != nil {
		a.source = c.Source
	}
	switch {
	case given == nil && useCS && cs.key != "":
		a.source = "AZURE_STORAGE_CONNECTION_STRING: shared key of account " + account
		if a.key, err = container.NewSharedKeyCredential(account, cs.key); err != nil {
			return auth{}, fmt.Errorf("%s: AccountKey is not valid base64", a.source)
		}
		return a, nil
	case given == nil && useCS && cs.sas != "":
		a.source, a.sas = "AZURE_STORAGE_CONNECTION_STRING: shared access signature", cs.sas
		return a, nil
	}
	return defaultChain(ctx, a, log)
}

// defaultChain uses the default Azure credential chain (environment,
// workload identity, managed identity, Azure CLI) when it hands out a
// token; otherwise the account is read anonymously, as Triton does without
// credentials, and the source says why.
func defaultChain(ctx context.Context, a auth, log *slog.Logger) (auth, error) {
	prefix := a.source
	if prefix != "" {
		prefix += ": "
	}
	cred, err := azidentity.NewDefaultAzureCredential(nil)
	if err == nil {
		pctx, cancel := context.WithTimeout(ctx, probeTimeout)
		_, err = cred.GetToken(pctx, policy.TokenRequestOptions{Scopes: []string{storageScope}})
		cancel()
	}
	if err == nil {
		a.token, a.source = cred, prefix+"default Azure credential chain"
		return a, nil
	}
	why := oneLine(err)
	if len(why) > 300 {
		why = why[:300] + "..."
	}
	log.Warn("azure: no credentials and the default Azure credential chain gave no token; using anonymous access", "account", a.account, "error", why)
	// The chain's own account of each attempt goes to the log only: it
	// runs to many lines.
	a.source = prefix + "none (anonymous: no account key or auth type, and the default Azure credential chain gave no token)"
	return a, nil
}

// connString is what a storage connection string says about blobs.
type connString struct {
	set      bool
	account  string
	key      string
	sas      string
	endpoint string
}

// parseConnectionString reads the Key=Value;... form the Azure portal and
// tools hand out. The endpoint is BlobEndpoint= when given, else built from
// DefaultEndpointsProtocol, AccountName and EndpointSuffix. Messages never
// quote the string: it holds the key.
func parseConnectionString(s string) (connString, error) {
	s = strings.TrimSpace(s)
	if s == "" {
		return connString{}, nil
	}
	cs := connString{set: true}
	proto, suffix := "https", "core.windows.net"
	for part := range strings.SplitSeq(s, ";") {
		if strings.TrimSpace(part) == "" {
			continue
		}
		k, v, ok := strings.Cut(part, "=")
		if !ok {
			return connString{}, fmt.Errorf("a part has no \"=\" (want Key=Value;...)")
		}
		k, v = strings.TrimSpace(k), strings.TrimSpace(v)
		switch strings.ToLower(k) {
		case "accountname":
			cs.account = v
		case "accountkey":
			cs.key = v
		case "sharedaccesssignature":
			cs.sas = strings.TrimPrefix(v, "?")
		case "blobendpoint":
			cs.endpoint = strings.TrimRight(v, "/")
		case "defaultendpointsprotocol":
			proto = v
		case "endpointsuffix":
			suffix = v
		case "usedevelopmentstorage":
			return connString{}, errors.New("UseDevelopmentStorage is not supported; give BlobEndpoint=http://127.0.0.1:10000/devstoreaccount1;AccountName=devstoreaccount1;AccountKey=<key>")
		}
	}
	if cs.endpoint == "" && cs.account != "" {
		cs.endpoint = proto + "://" + cs.account + ".blob." + suffix
	}
	if cs.endpoint != "" {
		u, err := url.Parse(cs.endpoint)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			return connString{}, fmt.Errorf("blob endpoint %q is not an http(s) URL", cs.endpoint)
		}
	}
	if cs.endpoint == "" && (cs.key != "" || cs.sas != "") {
		return connString{}, errors.New("it names neither AccountName nor BlobEndpoint")
	}
	return cs, nil
}
