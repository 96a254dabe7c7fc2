// Command mitoken gets a token with the Azure SDK's
// ManagedIdentityCredential, unchanged, as a training job would, and
// prints it for the test to verify.
package main

import (
	"context"
	"fmt"
	"os"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore/policy"
	"github.com/Azure/azure-sdk-for-go/sdk/azidentity"
)

func main() {
	var opts *azidentity.ManagedIdentityCredentialOptions
	if id := os.Getenv("WANT_CLIENT_ID"); id != "" {
		opts = &azidentity.ManagedIdentityCredentialOptions{ID: azidentity.ClientID(id)}
	}
	cred, err := azidentity.NewManagedIdentityCredential(opts)
	if err != nil {
		fmt.Println("credential:", err)
		os.Exit(2)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	tok, err := cred.GetToken(ctx, policy.TokenRequestOptions{Scopes: []string{"https://storage.azure.com/.default"}})
	if err != nil {
		fmt.Println("token error:", err)
		os.Exit(3)
	}
	fmt.Printf("TOKEN=%s\n", tok.Token)
}
