# AKS cluster with bring-your-own CNI for cnibench (driven by python-terraform).
# Credentials come only from the environment (ARM_CLIENT_ID, ARM_CLIENT_SECRET, ARM_TENANT_ID,
# ARM_SUBSCRIPTION_ID); nodes stay NotReady until cnibench installs the CNI.

terraform {
  required_version = ">= 1.5"
  required_providers {
    azurerm = {
      source  = "hashicorp/azurerm"
      version = "~> 4.0"
    }
  }
}

provider "azurerm" {
  features {}
}

variable "name" {
  type = string
}

variable "location" {
  type    = string
  default = "westeurope"
}

variable "node_count" {
  type    = number
  default = 3
}

variable "vm_size" {
  type    = string
  default = "Standard_A2_v2"
}

variable "kubernetes_version" {
  type    = string
  default = "1.33"
}

resource "azurerm_resource_group" "bench" {
  name     = "${var.name}-rg"
  location = var.location
  tags     = { "cnibench.io/cluster" = var.name }
}

resource "azurerm_kubernetes_cluster" "bench" {
  name                = var.name
  location            = azurerm_resource_group.bench.location
  resource_group_name = azurerm_resource_group.bench.name
  dns_prefix          = var.name
  kubernetes_version  = var.kubernetes_version

  default_node_pool {
    name       = "bench"
    node_count = var.node_count
    vm_size    = var.vm_size
  }

  identity {
    type = "SystemAssigned"
  }

  network_profile {
    network_plugin = "none"
  }

  tags = { "cnibench.io/cluster" = var.name }
}

output "kube_config_raw" {
  value     = azurerm_kubernetes_cluster.bench.kube_config_raw
  sensitive = true
}
