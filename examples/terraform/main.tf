# An OpenTofu/Terraform configuration keeping its state in cairn: run
# `cairn serve` (default 127.0.0.1:8080), then `tofu init && tofu apply`.
# It uses only the built-in terraform_data resource, so nothing is downloaded.
terraform {
  backend "http" {
    address        = "http://127.0.0.1:8080/terraform/v1/namespaces/default/states/network"
    lock_address   = "http://127.0.0.1:8080/terraform/v1/namespaces/default/states/network"
    unlock_address = "http://127.0.0.1:8080/terraform/v1/namespaces/default/states/network"
    lock_method    = "LOCK"
    unlock_method  = "UNLOCK"
  }
}

variable "cidr" {
  default = "10.0.0.0/16"
}

resource "terraform_data" "vpc" {
  input = var.cidr
}

output "vpc_cidr" {
  value = terraform_data.vpc.output
}

output "subnets" {
  value = [cidrsubnet(terraform_data.vpc.output, 8, 1), cidrsubnet(terraform_data.vpc.output, 8, 2)]
}

output "admin_token" {
  value     = "token-for-${terraform_data.vpc.output}"
  sensitive = true
}
