package api

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"strings"
)

// A workspace's data lives in Cumulus's own blob store, which speaks the
// Azure Blob protocol under one storage account name per workspace
// (StorageAccountName). Datastores name containers of that account: the
// two every Azure workspace has (workspaceblobstore, the default, and
// workspaceartifactstore, where job artifacts live) and those a user adds.

// Datastore is a datastore (…/workspaces/{ws}/datastores/{name}), of type
// AzureBlob: 2024-04-01's DatastoreResource with AzureBlobDatastore
// properties.
type Datastore struct {
	ID         string              `json:"id"`
	Name       string              `json:"name"`
	Type       string              `json:"type"`
	SystemData *SystemData         `json:"systemData,omitempty"`
	Properties DatastoreProperties `json:"properties"`
}

// DatastoreProperties is AzureBlobDatastore.
type DatastoreProperties struct {
	DatastoreType                 string                `json:"datastoreType"`
	AccountName                   string                `json:"accountName,omitempty"`
	ContainerName                 string                `json:"containerName,omitempty"`
	Endpoint                      string                `json:"endpoint,omitempty"`
	Protocol                      string                `json:"protocol,omitempty"`
	Credentials                   *DatastoreCredentials `json:"credentials,omitempty"`
	IsDefault                     bool                  `json:"isDefault"`
	Description                   string                `json:"description,omitempty"`
	Tags                          map[string]string     `json:"tags,omitempty"`
	Properties                    map[string]string     `json:"properties,omitempty"`
	ServiceDataAccessAuthIdentity string                `json:"serviceDataAccessAuthIdentity,omitempty"`
}

// DatastoreCredentials says how a datastore is reached. Cumulus's are
// always a SAS that listSecrets issues; secrets are never stored.
type DatastoreCredentials struct {
	CredentialsType string          `json:"credentialsType"`
	Secrets         json.RawMessage `json:"secrets,omitempty"`
}

// DatastoreSecrets is listSecrets' answer (SasDatastoreSecrets).
type DatastoreSecrets struct {
	SecretsType string `json:"secretsType"`
	SASToken    string `json:"sasToken,omitempty"`
}

// Datastore names and types.
const (
	TypeDatastore          = Provider + "/workspaces/datastores"
	DatastoreAzureBlob     = "AzureBlob"
	DefaultDatastore       = "workspaceblobstore"
	ArtifactDatastore      = "workspaceartifactstore"
	ArtifactContainer      = "azureml"
	StorageEndpoint        = "core.windows.net"
	CredentialsSAS         = "Sas"
	CredentialsNone        = "None"
	defaultContainerPrefix = "azureml-blobstore-"
)

// StorageAccountName is the storage account name of a workspace's blob
// store: "cml" and 21 hex digits of the workspace's unique id (a storage
// account name is 3–24 lower-case letters and digits). A workspace made
// again under the same name gets another id, so another account: what
// was signed for the old one does not open the new one.
func StorageAccountName(workspaceUID string) string {
	sum := sha256.Sum256([]byte(strings.ToLower(workspaceUID)))
	return "cml" + hex.EncodeToString(sum[:])[:21]
}

// StorageAccountID is the ARM id the workspace's storageAccount property
// and a pending upload's storageAccountArmId name.
func StorageAccountID(s Scope, account string) string {
	return s.GroupID() + "/providers/Microsoft.Storage/storageAccounts/" + account
}

// DefaultContainer is the container of a workspace's workspaceblobstore,
// named as Azure names it.
func DefaultContainer(workspaceUID string) string {
	id := strings.ToLower(workspaceUID)
	if CheckContainerName(defaultContainerPrefix+id) != nil { // not a UUID: a workspace stored before it had one
		sum := sha256.Sum256([]byte(id))
		id = hex.EncodeToString(sum[:16])
	}
	return defaultContainerPrefix + id
}

// BuiltinDatastores are the datastores every workspace has.
func BuiltinDatastores(s Scope, workspaceUID string) []Datastore {
	account := StorageAccountName(workspaceUID)
	mk := func(name, container, desc string, def bool) Datastore {
		return Datastore{ID: s.WorkspaceID() + "/datastores/" + name, Name: name, Type: TypeDatastore,
			Properties: DatastoreProperties{DatastoreType: DatastoreAzureBlob, AccountName: account, ContainerName: container,
				Endpoint: StorageEndpoint, Protocol: "https", Credentials: &DatastoreCredentials{CredentialsType: CredentialsSAS},
				IsDefault: def, Description: desc, ServiceDataAccessAuthIdentity: "None"}}
	}
	return []Datastore{
		mk(ArtifactDatastore, ArtifactContainer, "job artifacts: each job's logs and default outputs under ExperimentRun/dcid.<job>/", false),
		mk(DefaultDatastore, DefaultContainer(workspaceUID), "the workspace's default datastore: uploads, data assets and job outputs", true),
	}
}

// IsBuiltinDatastore reports whether name is one of BuiltinDatastores.
func IsBuiltinDatastore(name string) bool {
	return strings.EqualFold(name, DefaultDatastore) || strings.EqualFold(name, ArtifactDatastore)
}

// CheckDatastoreName applies Azure's datastore name rule: 1–255 letters,
// digits and '_', starting with a letter or digit.
func CheckDatastoreName(name string) error {
	if len(name) < 1 || len(name) > 255 {
		return fmt.Errorf("datastore name %q must be 1 to 255 characters long", name)
	}
	if !isLetter(name[0]) && !isDigit(name[0]) {
		return fmt.Errorf("datastore name %q must start with a letter or digit", name)
	}
	for i := 0; i < len(name); i++ {
		if c := name[i]; !isLetter(c) && !isDigit(c) && c != '_' {
			return fmt.Errorf("datastore name %q may contain only letters, digits and '_'", name)
		}
	}
	return nil
}

// CheckContainerName applies Azure Storage's container name rule: 3–63
// lower-case letters, digits and '-', starting and ending with a letter
// or digit, no "--".
func CheckContainerName(name string) error {
	if len(name) < 3 || len(name) > 63 {
		return fmt.Errorf("container name %q must be 3 to 63 characters long", name)
	}
	for i := 0; i < len(name); i++ {
		c := name[i]
		if !(c >= 'a' && c <= 'z') && !isDigit(c) && c != '-' {
			return fmt.Errorf("container name %q may contain only lower-case letters, digits and '-'", name)
		}
	}
	if name[0] == '-' || name[len(name)-1] == '-' || strings.Contains(name, "--") {
		return fmt.Errorf("container name %q must start and end with a letter or digit and hold no \"--\"", name)
	}
	return nil
}

// PrepareDatastore validates a datastore a user adds to a workspace whose
// blob store account is account, and fills its defaults. Its container is
// one of that account: Cumulus reaches no other storage account, and
// stores no secret (listSecrets issues a SAS).
func PrepareDatastore(d *Datastore, name, account string) error {
	var v Validation
	if err := CheckDatastoreName(name); err != nil {
		v.Add(CodeInvalidName, "name", "%s", err)
	} else if IsBuiltinDatastore(name) {
		v.Add(CodeInvalidName, "name", "datastore %s is built into every workspace and cannot be changed", name)
	}
	p := &d.Properties
	if p.DatastoreType == "" {
		p.DatastoreType = DatastoreAzureBlob
	}
	if p.DatastoreType != DatastoreAzureBlob {
		v.Add(CodeValidationError, "properties.datastoreType", "datastoreType %q is not supported: Cumulus serves AzureBlob datastores from its own blob store", p.DatastoreType)
	}
	if p.AccountName == "" {
		p.AccountName = account
	}
	if !strings.EqualFold(p.AccountName, account) {
		v.Add(CodeValidationError, "properties.accountName", "accountName %q cannot be reached: this workspace's blob store is account %s (Cumulus reaches no other storage account)", p.AccountName, account)
	}
	p.AccountName = account
	if err := CheckContainerName(p.ContainerName); err != nil {
		v.Add(CodeValidationError, "properties.containerName", "%s", err)
	} else if p.ContainerName == ArtifactContainer {
		v.Add(CodeValidationError, "properties.containerName", "container %s holds job artifacts (workspaceartifactstore); choose another", ArtifactContainer)
	}
	if p.Endpoint == "" {
		p.Endpoint = StorageEndpoint
	}
	if p.Endpoint != StorageEndpoint {
		v.Add(CodeValidationError, "properties.endpoint", "endpoint %q is not supported; Cumulus's blob store answers as %s", p.Endpoint, StorageEndpoint)
	}
	if p.Protocol == "" {
		p.Protocol = "https"
	}
	if p.Protocol != "https" {
		v.Add(CodeValidationError, "properties.protocol", "protocol %q is not supported (https)", p.Protocol)
	}
	if c := p.Credentials; c != nil {
		switch {
		case !strings.EqualFold(c.CredentialsType, CredentialsSAS) && !strings.EqualFold(c.CredentialsType, CredentialsNone):
			v.Add(CodeValidationError, "properties.credentials.credentialsType", "credentialsType %q is not supported: Cumulus issues a SAS for its own containers (listSecrets); send credentialsType Sas or None", c.CredentialsType)
		case len(c.Secrets) > 0 && string(c.Secrets) != "null":
			v.Add(CodeValidationError, "properties.credentials.secrets", "secrets are not accepted: Cumulus issues its own short-lived SAS for the container (listSecrets) and stores no key or token")
		}
	}
	p.Credentials = &DatastoreCredentials{CredentialsType: CredentialsSAS}
	if p.IsDefault {
		v.Add(CodeValidationError, "properties.isDefault", "the default datastore is %s; a datastore a user adds cannot be the default", DefaultDatastore)
	}
	if p.ServiceDataAccessAuthIdentity == "" {
		p.ServiceDataAccessAuthIdentity = "None"
	}
	checkTags(&v, p.Tags)
	return v.Err()
}
