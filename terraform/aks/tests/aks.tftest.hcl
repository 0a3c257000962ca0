# `tofu test` of the AKS module (nox -s aks-validate): plans against the azurerm provider's real
# schema with its API mocked, so no credentials and no Azure are needed.

mock_provider "azurerm" {
  # The provider still validates the node pools' kubernetes_cluster_id: a mocked cluster needs
  # an ID of the managed-cluster form, not a random string.
  mock_resource "azurerm_kubernetes_cluster" {
    defaults = {
      id = "/subscriptions/00000000-0000-0000-0000-000000000000/resourceGroups/cnibench-check-rg/providers/Microsoft.ContainerService/managedClusters/cnibench-check"
    }
  }
}

variables {
  name = "cnibench-check"
}

run "bring_your_own_cni_and_a_pool_per_role" {
  command = plan

  assert {
    condition     = azurerm_kubernetes_cluster.bench.network_profile[0].network_plugin == "none"
    error_message = "cnibench installs the CNI itself: network_plugin must be none."
  }

  assert {
    condition     = toset(keys(azurerm_kubernetes_cluster_node_pool.role)) == toset(["client", "server", "egress-gw"])
    error_message = "By default each of cnibench's three roles gets a node pool."
  }

  assert {
    condition = alltrue([
      for role, pool in azurerm_kubernetes_cluster_node_pool.role :
      pool.node_labels["cnibench.io/role"] == role && pool.node_count == 1 && pool.mode == "User"
    ])
    error_message = "Each role's pool is a user pool of one node labelled cnibench.io/role=<role>."
  }

  assert {
    condition     = azurerm_kubernetes_cluster_node_pool.role["egress-gw"].name == "egressgw"
    error_message = "Pool names are the role without its dash (AKS allows letters and digits)."
  }

  assert {
    condition = (
      azurerm_kubernetes_cluster.bench.default_node_pool[0].only_critical_addons_enabled
      && azurerm_kubernetes_cluster.bench.default_node_pool[0].node_count == 1
      && try(length(azurerm_kubernetes_cluster.bench.default_node_pool[0].node_labels), 0) == 0
    )
    error_message = "The system pool is one node for AKS's add-ons only, with no cnibench role."
  }
}

run "a_repeated_role_gets_more_nodes" {
  command = plan

  variables {
    role_nodes = { client = 2, server = 1 }
  }

  assert {
    condition     = azurerm_kubernetes_cluster_node_pool.role["client"].node_count == 2
    error_message = "Two client entries make a client pool of two nodes."
  }

  assert {
    condition     = !contains(keys(azurerm_kubernetes_cluster_node_pool.role), "egress-gw")
    error_message = "A role that is not asked for gets no pool."
  }
}

run "an_unknown_role_is_refused" {
  command = plan

  variables {
    role_nodes = { worker = 1 }
  }

  expect_failures = [var.role_nodes]
}
