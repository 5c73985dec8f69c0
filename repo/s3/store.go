package s3

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"sort"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	awshttp "github.com/aws/aws-sdk-go-v2/aws/transport/http"
	"github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/feature/ec2/imds"
	awss3 "github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/smithy-go"

	"github.com/inferd/inferd/repo"
)

// Options tune Open. The zero value is fine.
type Options struct {
	// HTTPClient carries S3 requests; nil uses the SDK's default. It is not
	// used for credential look-ups, so the instance-metadata probe keeps the
	// SDK's short timeouts.
	HTTPClient *http.Client
	// Logger receives debug messages; nil discards them.
	Logger *slog.Logger
	// Creds, when set, are the root's own credentials (an entry of
	// Triton's credential file) and come before the environment's.
	Creds *Credentials
	// Getenv reads the variables Open honours as Triton does (AWS_REGION,
	// AWS_DEFAULT_REGION, AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY,
	// AWS_SESSION_TOKEN, AWS_PROFILE, AWS_EC2_METADATA_DISABLED); the
	// binary hands down its environment's (cmd/inferd env.go). Nil reads
	// none. The SDK's default chain (config.LoadDefaultConfig) reads the
	// process environment itself, as the AWS SDK documents; that is left
	// to it.
	Getenv repo.Getenv
}

// Credentials are explicit credentials for one root. KeyID with Secret
// are used as static keys; failing that Profile names a shared-config
// profile; with neither, the environment is used as without Creds. Region,
// when set, replaces the environment's region in every case.
type Credentials struct {
	KeyID        string
	Secret       string
	SessionToken string
	Region       string
	Profile      string
	// Source says where they came from in messages, for instance
	// `credential file /etc/creds.json entry "s3://bucket"`; empty reads
	// "explicit credentials".
	Source string
}

// Store is one s3:// repository root.
type Store struct {
	root   string
	loc    Location
	client *awss3.Client
	creds  string // where the credentials came from, for messages
	log    *slog.Logger
	// pageSize is ListObjectsV2's MaxKeys; 0 leaves S3's default (1000).
	// Tests set it small to exercise pagination.
	pageSize int32
}

var _ repo.Store = (*Store)(nil)

const (
	defaultRegion = "us-east-1" // so custom endpoints work with no region set
	// credsTimeout bounds the credential look-up at Open: the default chain
	// ends with the instance-metadata service, which off EC2 can take
	// seconds to give up.
	credsTimeout = 10 * time.Second
)

// Open parses root, builds a client and checks access with HeadBucket, so a
// wrong bucket, endpoint or credential fails at start-up with a clear error.
func Open(ctx context.Context, root string, opts Options) (*Store, error) {
	loc, err := ParseURL(root)
	if err != nil {
		return nil, err
	}
	log := opts.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	cfg, creds, chain, err := loadConfig(ctx, root, opts.Creds, opts.Getenv.Get)
	if err != nil {
		return nil, err
	}

	// Fetch credentials now: a missing credential then reads as such, not
	// as a failed HeadBucket, and the default chain can say which provider
	// it picked.
	rctx, cancel := context.WithTimeout(ctx, credsTimeout)
	c, err := cfg.Credentials.Retrieve(rctx)
	cancel()
	if err != nil {
		return nil, fmt.Errorf("s3 repository %s: no usable AWS credentials from %s%s: %w", root, creds, chainHint(chain), flat(err))
	}
	if chain {
		creds = fmt.Sprintf("%s (%s)", creds, c.Source)
	}

	client := awss3.NewFromConfig(cfg, func(o *awss3.Options) {
		if opts.HTTPClient != nil {
			o.HTTPClient = opts.HTTPClient
		}
		if loc.Endpoint != "" {
			// MinIO and most S3 clones serve only path-style URLs.
			o.BaseEndpoint = aws.String(loc.Endpoint)
			o.UsePathStyle = true
		}
		// Download checks checksums itself; see noSDKValidation.
		o.DisableLogOutputChecksumValidationSkipped = true
	})
	s := &Store{root: root, loc: loc, client: client, creds: creds, log: log}

	if _, err := client.HeadBucket(ctx, &awss3.HeadBucketInput{Bucket: aws.String(loc.Bucket)}); err != nil {
		return nil, fmt.Errorf("s3 repository %s: bucket %q at %s (credentials: %s): %w", root, loc.Bucket, s.endpoint(cfg.Region), creds, explain("bucket", err))
	}
	log.Debug("s3 repository opened", "root", root, "bucket", loc.Bucket, "prefix", loc.Prefix, "endpoint", s.endpoint(cfg.Region), "credentials", creds)
	return s, nil
}

// loadConfig picks credentials as Triton does: the root's own credentials
// (static keys, else a profile), then static keys from the environment,
// else AWS_PROFILE, else the SDK default chain. It returns the config, a
// description of the credential source and whether the default chain is
// the source (whose provider is then known only once it is asked).
func loadConfig(ctx context.Context, root string, own *Credentials, getenv func(string) string) (cfg aws.Config, creds string, chain bool, err error) {
	region := getenv("AWS_REGION")
	if region == "" {
		region = getenv("AWS_DEFAULT_REGION") // Triton's variable; the SDK ignores it
	}
	label := ""
	if own != nil {
		label = own.Source
		if label == "" {
			label = "explicit credentials"
		}
		if own.Region != "" {
			region = own.Region
		}
		if own.KeyID != "" && own.Secret != "" {
			return staticConfig(region, own.KeyID, own.Secret, own.SessionToken), label + " (static keys)", false, nil
		}
		if own.Profile != "" {
			cfg, creds, err := sharedConfig(ctx, getenv, root, region, own.Profile, label+" (profile "+own.Profile+")")
			return cfg, creds, false, err
		}
		// Triton falls back to the default chain here, which reads the
		// environment's keys first too.
		label += " (no keys or profile), then "
	}

	id, secret := getenv("AWS_ACCESS_KEY_ID"), getenv("AWS_SECRET_ACCESS_KEY")
	if id != "" && secret != "" {
		return staticConfig(region, id, secret, getenv("AWS_SESSION_TOKEN")), label + "static keys from AWS_ACCESS_KEY_ID", false, nil
	}
	if p := getenv("AWS_PROFILE"); p != "" {
		cfg, creds, err := sharedConfig(ctx, getenv, root, region, p, label+"profile "+p)
		return cfg, creds, false, err
	}
	cfg, creds, err = sharedConfig(ctx, getenv, root, region, "", label+"default chain")
	return cfg, creds, true, err
}

// staticConfig uses fixed keys. It is built by hand rather than by
// config.LoadDefaultConfig, which fails when AWS_PROFILE names a profile
// missing from the shared files; the keys must win over AWS_PROFILE.
func staticConfig(region, id, secret, token string) aws.Config {
	if region == "" {
		region = defaultRegion
	}
	return aws.Config{
		Region:      region,
		Credentials: aws.NewCredentialsCache(credentials.NewStaticCredentialsProvider(id, secret, token)),
	}
}

// sharedConfig loads the SDK configuration for profile, or for the default
// chain when profile is empty; creds describes the source for messages.
func sharedConfig(ctx context.Context, getenv func(string) string, root, region, profile, creds string) (aws.Config, string, error) {
	var lopts []func(*config.LoadOptions) error
	if region != "" {
		lopts = append(lopts, config.WithRegion(region))
	}
	if strings.EqualFold(getenv("AWS_EC2_METADATA_DISABLED"), "true") {
		lopts = append(lopts, config.WithEC2IMDSClientEnableState(imds.ClientDisabled))
	}
	if profile != "" {
		// Set explicitly so the profile also beats web-identity variables
		// and the environment's keys.
		lopts = append(lopts, config.WithSharedConfigProfile(profile))
	}
	cfg, err := config.LoadDefaultConfig(ctx, lopts...)
	if err != nil {
		return aws.Config{}, "", fmt.Errorf("s3 repository %s: load AWS configuration (%s): %w", root, creds, flat(err))
	}
	if cfg.Region == "" {
		cfg.Region = defaultRegion
	}
	if cfg.Credentials == nil {
		return aws.Config{}, "", fmt.Errorf("s3 repository %s: no AWS credentials found (%s)", root, creds)
	}
	return cfg, creds, nil
}

// chainHint lists where the default chain looked, which its own error
// leaves out.
func chainHint(chain bool) string {
	if !chain {
		return ""
	}
	return " (AWS_ACCESS_KEY_ID+AWS_SECRET_ACCESS_KEY, AWS_PROFILE, shared config and credentials files, web identity, container and instance roles)"
}

func (s *Store) String() string { return s.root }

// endpoint names where requests go, for messages.
func (s *Store) endpoint(region string) string {
	if s.loc.Endpoint != "" {
		return "endpoint " + s.loc.Endpoint
	}
	return "AWS S3 region " + region
}

// fullKey maps a key relative to the root to the bucket's key.
func (s *Store) fullKey(key string) string {
	if s.loc.Prefix == "" {
		return key
	}
	return s.loc.Prefix + "/" + key
}

// List returns every object under root/prefix, keys relative to the root.
func (s *Store) List(ctx context.Context, prefix string) ([]repo.Object, error) {
	// The trailing slash keeps root "models" from matching "models2/...".
	base := ""
	if s.loc.Prefix != "" {
		base = s.loc.Prefix + "/"
	}
	in := &awss3.ListObjectsV2Input{Bucket: aws.String(s.loc.Bucket), Prefix: aws.String(base + prefix)}
	p := awss3.NewListObjectsV2Paginator(s.client, in, func(o *awss3.ListObjectsV2PaginatorOptions) {
		o.Limit = s.pageSize
	})
	var objs []repo.Object
	for p.HasMorePages() {
		page, err := p.NextPage(ctx)
		if err != nil {
			return nil, s.wrap("list", "bucket", base+prefix, err)
		}
		for _, o := range page.Contents {
			k := aws.ToString(o.Key)
			// Console "create folder" leaves empty keys ending in "/".
			if strings.HasSuffix(k, "/") {
				continue
			}
			objs = append(objs, repo.Object{
				Key:      strings.TrimPrefix(k, base),
				Size:     aws.ToInt64(o.Size),
				Version:  strings.Trim(aws.ToString(o.ETag), `"`),
				Modified: aws.ToTime(o.LastModified),
			})
		}
	}
	// S3 already lists in byte order; clones may not.
	sort.Slice(objs, func(i, j int) bool { return objs[i].Key < objs[j].Key })
	return objs, nil
}

// wrap adds the object, bucket and credential source to an SDK error.
func (s *Store) wrap(op, what, key string, err error) error {
	return fmt.Errorf("s3 %s s3://%s/%s at %s (credentials: %s): %w", op, s.loc.Bucket, key, s.endpoint(s.client.Options().Region), s.creds, explain(what, err))
}

// explain puts the usual reason for an HTTP status in front of the SDK's
// message, which alone is terse ("api error NotFound: Not Found").
func explain(what string, err error) error {
	var re *awshttp.ResponseError
	if !errors.As(err, &re) {
		return flat(err)
	}
	hint := ""
	switch re.HTTPStatusCode() {
	case http.StatusMovedPermanently:
		hint = "the bucket is in another region"
		if r := re.Response.Header.Get("X-Amz-Bucket-Region"); r != "" {
			hint += " (" + r + "): set AWS_REGION=" + r
		}
	case http.StatusForbidden:
		hint = "access denied: check the credentials and that they allow s3:ListBucket and s3:GetObject"
	case http.StatusNotFound:
		hint = what + " not found"
		var ae smithy.APIError
		if errors.As(err, &ae) && ae.ErrorCode() == "NoSuchBucket" {
			hint = "bucket not found"
		}
	case http.StatusBadRequest:
		hint = "bad request: check the region and the endpoint"
	}
	if hint == "" {
		return flat(err)
	}
	return &flatError{msg: hint + ": " + flat(err).Error(), err: err}
}

// flat keeps a multi-line SDK message on one log line; errors.Is and As
// still reach the original.
func flat(err error) error {
	return &flatError{msg: strings.Join(strings.Fields(err.Error()), " "), err: err}
}

type flatError struct {
	msg string
	err error
}

func (e *flatError) Error() string { return e.msg }
func (e *flatError) Unwrap() error { return e.err }
