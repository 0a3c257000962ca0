# AKS cluster with bring-your-own CNI for cnibench (driven by python-terraform, with terraform
# or tofu). Credentials come only from the environment (ARM_CLIENT_ID, ARM_CLIENT_SECRET,
# ARM_TENANT_ID, ARM_SUBSCRIPTION_ID); nodes stay NotReady until cnibench installs the CNI.
#
# Placement: cnibench puts each benchmark pod on a node labelled cnibench.io/role=<role>. Each
# role gets a user node pool of its own whose nodes carry that label; AKS's add-ons (CoreDNS,
# metrics-server, konnectivity) keep to a separate one-node system pool, off the measured nodes.
# Checked offline against the provider's schema by `nox -s aks-validate` (tests/aks.tftest.hcl).

terraform {
  required_version = ">= 1.5"
  required_providers {
    # 5.2 is the provider release nox -s aks-validate checks this module against.
    azurerm = {
      source  = "hashicorp/azurerm"
      version = "~> 5.2"
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

variable "role_nodes" {
  description = "Nodes per cnibench role (the cnibench.io/role label value): one node pool each."
  type        = map(number)
  default     = { client = 1, server = 1, "egress-gw" = 1 }

  validation {
    condition = length(var.role_nodes) > 0 && alltrue([
      for role, count in var.role_nodes :
      contains(["client", "server", "egress-gw"], role) && count >= 1
    ])
    error_message = "role_nodes maps client, server or egress-gw to a node count of at least 1."
  }
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

  # The system pool: AKS's add-ons only (CriticalAddonsOnly taint), no cnibench role.
  default_node_pool {
    name                         = "system"
    node_count                   = 1
    vm_size                      = var.vm_size
    only_critical_addons_enabled = true
  }

  identity {
    type = "SystemAssigned"
  }

  network_profile {
    network_plugin = "none"
  }

  # Required since azurerm 5.0. Manual: only the pools declared here, never nodes that node
  # auto-provisioning adds, which would carry no cnibench role.
  node_provisioning_profile {
    mode = "Manual"
  }

  tags = { "cnibench.io/cluster" = var.name }
}

resource "azurerm_kubernetes_cluster_node_pool" "role" {
  for_each = var.role_nodes

  # Pool names are lowercase letters and digits: egress-gw -> egressgw.
  name                  = replace(each.key, "-", "")
  kubernetes_cluster_id = azurerm_kubernetes_cluster.bench.id
  mode                  = "User"
  vm_size               = var.vm_size
  node_count            = each.value
  node_labels           = { "cnibench.io/role" = each.key }
  tags                  = { "cnibench.io/cluster" = var.name }
}

output "kube_config_raw" {
  value     = azurerm_kubernetes_cluster.bench.kube_config_raw
  sensitive = true
}
