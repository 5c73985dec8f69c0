package as

import (
	"context"
	"log/slog"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/storage/azblob/sas"
)

func TestParseConnectionString(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want connString
		err  string
	}{
		{in: ""},
		{in: "  "},
		{in: "DefaultEndpointsProtocol=https;AccountName=acct;AccountKey=a2V5;EndpointSuffix=core.windows.net",
			want: connString{set: true, account: "acct", key: "a2V5", endpoint: "https://acct.blob.core.windows.net"}},
		{in: "AccountName=acct;AccountKey=a2V5==;EndpointSuffix=core.chinacloudapi.cn",
			want: connString{set: true, account: "acct", key: "a2V5==", endpoint: "https://acct.blob.core.chinacloudapi.cn"}},
		{in: "BlobEndpoint=http://127.0.0.1:10000/devstoreaccount1/;AccountName=devstoreaccount1;AccountKey=a2V5;",
			want: connString{set: true, account: "devstoreaccount1", key: "a2V5", endpoint: "http://127.0.0.1:10000/devstoreaccount1"}},
		{in: "BlobEndpoint=https://acct.privatelink.blob.core.windows.net;SharedAccessSignature=?sv=2022&sig=abc%3D",
			want: connString{set: true, sas: "sv=2022&sig=abc%3D", endpoint: "https://acct.privatelink.blob.core.windows.net"}},
		{in: "blobendpoint=http://h:1/a", want: connString{set: true, endpoint: "http://h:1/a"}},
		{in: "UseDevelopmentStorage=true", err: "UseDevelopmentStorage is not supported"},
		{in: "AccountName=acct;garbage", err: `has no "="`},
		{in: "BlobEndpoint=ftp://h/a", err: "is not an http(s) URL"},
		{in: "AccountKey=c2VjcmV0", err: "neither AccountName nor BlobEndpoint"},
	} {
		got, err := parseConnectionString(tc.in)
		if tc.err != "" {
			if err == nil || !strings.Contains(err.Error(), tc.err) {
				t.Errorf("%q: %+v, %v; want an error containing %q", tc.in, got, err, tc.err)
			}
			if err != nil && strings.Contains(err.Error(), "c2VjcmV0") {
				t.Errorf("%q: the error shows the key: %v", tc.in, err)
			}
			continue
		}
		if err != nil || got != tc.want {
			t.Errorf("%q = %+v, %v; want %+v", tc.in, got, err, tc.want)
		}
	}
}

// TestResolve: which endpoint and credentials a root gets from the
// variables, the connection string and a credential file entry.
func TestResolve(t *testing.T) {
	const key = "a2V5a2V5a2V5" // base64
	type env map[string]string
	for _, tc := range []struct {
		name     string
		env      env
		given    *Credentials
		account  string // the account used
		endpoint string
		kind     string // key, token, sas
		source   string
		err      string
	}{
		{name: "account key", env: env{"AZURE_STORAGE_KEY": key},
			account: "acct", endpoint: "https://acct.blob.core.windows.net", kind: "key", source: "environment AZURE_STORAGE_KEY: shared key of account acct"},
		{name: "account replaced", env: env{"AZURE_STORAGE_ACCOUNT": "other", "AZURE_STORAGE_KEY": key},
			account: "other", endpoint: "https://other.blob.core.windows.net", kind: "key", source: "shared key of account other"},
		{name: "invalid account", env: env{"AZURE_STORAGE_ACCOUNT": "Not-Valid"}, err: `account "Not-Valid" is not a valid storage account name`},
		{name: "auth type key", env: env{"AZURE_STORAGE_AUTH_TYPE": "key", "AZURE_STORAGE_KEY": key}, account: "acct", kind: "key",
			source: "environment AZURE_STORAGE_KEY, AZURE_STORAGE_AUTH_TYPE: shared key"},
		{name: "auth type key without a key", env: env{"AZURE_STORAGE_AUTH_TYPE": "key"}, err: `auth type "key" needs an account key`},
		{name: "unknown auth type", env: env{"AZURE_STORAGE_AUTH_TYPE": "sas"}, err: `auth type "sas" is not one of "key", "managed_identity", "default"`},
		{name: "bad key", env: env{"AZURE_STORAGE_KEY": "not base64!"}, err: "the account key is not valid base64"},
		{name: "managed identity", env: env{"AZURE_STORAGE_AUTH_TYPE": "managed_identity", "AZURE_STORAGE_CLIENT_ID": "cid", "AZURE_STORAGE_KEY": key},
			account: "acct", kind: "token", source: "managed identity (client id cid)"},
		{name: "default chain", env: env{"AZURE_STORAGE_AUTH_TYPE": "default"}, account: "acct", kind: "token", source: "default Azure credential chain"},
		{name: "connection string key", env: env{"AZURE_STORAGE_CONNECTION_STRING": "BlobEndpoint=http://127.0.0.1:9/acct;AccountName=acct;AccountKey=" + key},
			account: "acct", endpoint: "http://127.0.0.1:9/acct", kind: "key", source: "AZURE_STORAGE_CONNECTION_STRING: shared key of account acct"},
		{name: "variables before the connection string's key", env: env{"AZURE_STORAGE_KEY": key, "AZURE_STORAGE_CONNECTION_STRING": "BlobEndpoint=http://127.0.0.1:9/acct;AccountKey=" + key},
			account: "acct", endpoint: "http://127.0.0.1:9/acct", kind: "key", source: "environment AZURE_STORAGE_KEY"},
		{name: "connection string sas", env: env{"AZURE_STORAGE_CONNECTION_STRING": "BlobEndpoint=https://x.example/;SharedAccessSignature=sv=1&sig=2"},
			account: "acct", endpoint: "https://x.example", kind: "sas", source: "AZURE_STORAGE_CONNECTION_STRING: shared access signature"},
		{name: "connection string of another account", env: env{"AZURE_STORAGE_KEY": key, "AZURE_STORAGE_CONNECTION_STRING": "BlobEndpoint=http://127.0.0.1:9/b;AccountName=bacct;AccountKey=" + key},
			account: "acct", endpoint: "https://acct.blob.core.windows.net", kind: "key"},
		{name: "bad connection string", env: env{"AZURE_STORAGE_CONNECTION_STRING": "nonsense"}, err: "AZURE_STORAGE_CONNECTION_STRING: a part has no"},
		{name: "file entry replaces the variables", env: env{"AZURE_STORAGE_KEY": "not base64!", "AZURE_STORAGE_CONNECTION_STRING": "BlobEndpoint=http://127.0.0.1:9/fileacct"},
			given:   &Credentials{Account: "fileacct", Key: key, Source: `credential file /c.json entry "as://"`},
			account: "fileacct", endpoint: "http://127.0.0.1:9/fileacct", kind: "key", source: `credential file /c.json entry "as://": shared key of account fileacct`},
		{name: "file entry auth type", given: &Credentials{AuthType: "managed_identity", Source: "entry"}, account: "acct", kind: "token", source: "entry: managed identity"},
		{name: "file entry ignores the connection string's key",
			env:   env{"AZURE_STORAGE_CONNECTION_STRING": "BlobEndpoint=http://127.0.0.1:9/acct;AccountKey=" + key},
			given: &Credentials{AuthType: "bogus", Source: "entry"}, err: `entry: auth type "bogus"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			isolate(t)
			for k, v := range tc.env {
				t.Setenv(k, v)
			}
			a, err := resolve(context.Background(), "acct", tc.given, os.Getenv, slog.New(slog.DiscardHandler))
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("err = %v; want it to contain %q", err, tc.err)
				}
				if strings.Contains(err.Error(), "a2V5a2V5") {
					t.Errorf("the error shows the key: %v", err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			kind := ""
			switch {
			case a.key != nil:
				kind = "key"
			case a.token != nil:
				kind = "token"
			case a.sas != "":
				kind = "sas"
			}
			if a.account != tc.account || kind != tc.kind || (tc.endpoint != "" && a.endpoint != tc.endpoint) || !strings.Contains(a.source, tc.source) {
				t.Fatalf("got account %q, endpoint %q, %s credentials from %q; want %q, %q, %s from %q",
					a.account, a.endpoint, kind, a.source, tc.account, tc.endpoint, tc.kind, tc.source)
			}
		})
	}
}

// TestKeyAndSASAgainstAzurite: the shared key from AZURE_STORAGE_KEY (the
// connection string naming only the endpoint), and a container SAS from
// the connection string, both read the container.
func TestKeyAndSASAgainstAzurite(t *testing.T) {
	srv := emulator(t)
	srv.Put(t, "repo", "m/x/1/model.onnx", []byte("bytes"))
	t.Setenv("AZURE_STORAGE_CONNECTION_STRING", "BlobEndpoint="+srv.Endpoint)
	t.Setenv("AZURE_STORAGE_KEY", srv.Key)
	s := open(t, "as://"+account+"/repo/m")
	if objs, err := s.List(context.Background(), ""); err != nil || len(objs) != 1 || !strings.Contains(s.creds, "environment AZURE_STORAGE_KEY") {
		t.Fatalf("List = %+v, %v (credentials %q)", objs, err, s.creds)
	}

	t.Setenv("AZURE_STORAGE_KEY", "")
	cc := srv.Client().ServiceClient().NewContainerClient("repo")
	sasURL, err := cc.GetSASURL(sas.ContainerPermissions{Read: true, List: true}, time.Now().Add(time.Hour), nil)
	if err != nil {
		t.Fatal(err)
	}
	_, query, _ := strings.Cut(sasURL, "?")
	t.Setenv("AZURE_STORAGE_CONNECTION_STRING", "BlobEndpoint="+srv.Endpoint+";SharedAccessSignature="+query)
	s = open(t, "as://"+account+"/repo/m")
	objs, err := s.List(context.Background(), "")
	if err != nil || len(objs) != 1 || !strings.Contains(s.creds, "shared access signature") {
		t.Fatalf("List with a SAS = %+v, %v (credentials %q)", objs, err, s.creds)
	}
	if _, err := s.Download(context.Background(), "x/1/model.onnx", t.TempDir()+"/f"); err != nil {
		t.Fatal(err)
	}
	// A SAS without List cannot serve a repository: Open says so.
	sasURL, err = cc.GetSASURL(sas.ContainerPermissions{Read: true}, time.Now().Add(time.Hour), nil)
	if err != nil {
		t.Fatal(err)
	}
	_, query, _ = strings.Cut(sasURL, "?")
	t.Setenv("AZURE_STORAGE_CONNECTION_STRING", "BlobEndpoint="+srv.Endpoint+";SharedAccessSignature="+query)
	_, err = Open(context.Background(), "as://"+account+"/repo/m", Options{Getenv: os.Getenv})
	if err == nil || !strings.Contains(err.Error(), "403") || !strings.Contains(err.Error(), "shared access signature") {
		t.Fatalf("Open with a read-only SAS: %v", err)
	}
}
